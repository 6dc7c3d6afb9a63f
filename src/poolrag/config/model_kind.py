"""Which family a model belongs to, and therefore which tasks it can run."""

from __future__ import annotations

from enum import Enum

from poolrag.config.model_spec import ModelSpec
from poolrag.config.pooler_config import PoolerConfig
from poolrag.errors import ModelLoadError


class ModelKind(Enum):
    """The forward pass a family needs; one per loader branch."""

    EMBEDDING = "embedding"  # backbone hidden states -> pooled vectors
    COLBERT = "colbert"  # backbone hidden states -> projected per-token vectors
    SEQUENCE_CLASSIFIER = "sequence_classifier"  # *ForSequenceClassification logits
    TOKEN_CLASSIFIER = "token_classifier"  # *ForTokenClassification logits
    # Decoders: the backbone runs alone and its hidden states are pooled here, so the row a
    # score is read from never depends on padding or on pad_token_id.
    DECODER_CLASSIFIER = "decoder_classifier"  # backbone -> LAST token -> the model's own `score` head
    LM_HEAD_CLASSIFIER = "lm_head_classifier"  # *ForCausalLM -> LAST token -> a few lm_head rows
    STEP_REWARD = "step_reward"  # backbone -> step-tag tokens -> lm_head rows or `score` head

    @property
    def score_kind(self) -> str:
        """How ``Engine.score`` works: one joint forward per pair, cosine of vectors, or MaxSim."""
        if self in _PAIR_SCORERS:
            return "cross-encoder"
        return "maxsim" if self is ModelKind.COLBERT else "cosine"

    @property
    def rewards_are_raw(self) -> bool:
        """Sequence reward models return the head's raw value, not a probability."""
        return self in (ModelKind.SEQUENCE_CLASSIFIER, ModelKind.DECODER_CLASSIFIER)


_PAIR_SCORERS = (ModelKind.SEQUENCE_CLASSIFIER, ModelKind.DECODER_CLASSIFIER, ModelKind.LM_HEAD_CLASSIFIER)
CONVERSIONS = ("embed", "classify", "reward")


SUPPORTED_TASKS: dict[ModelKind, tuple[str, ...]] = {
    ModelKind.EMBEDDING: ("embed", "score", "token_embed"),
    ModelKind.COLBERT: ("token_embed", "score"),
    ModelKind.SEQUENCE_CLASSIFIER: ("classify", "score", "reward"),
    ModelKind.TOKEN_CLASSIFIER: ("token_classify", "reward"),
    ModelKind.DECODER_CLASSIFIER: ("classify", "score", "reward"),
    ModelKind.LM_HEAD_CLASSIFIER: ("classify", "score"),
    ModelKind.STEP_REWARD: ("reward",),
}


def _is_causal_lm(arch: str) -> bool:
    return arch.endswith("ForCausalLM") or arch.endswith("LMHeadModel")


def _remote_auto_classes(spec: ModelSpec) -> set[str]:
    return set((getattr(spec.hf_config, "auto_map", None) or {}).keys())


def _reads_last_token(spec: ModelSpec) -> bool:
    """Decoder classifiers whose head we can apply to the last real token ourselves.

    transformers' own ``*ForSequenceClassification`` of a causal model type does, and so do
    remote-code ``*ForRewardModel`` heads (Qwen2-Math-RM style); other remote classifiers
    (e.g. bidirectional LLM rerankers that mean-pool) keep their own forward.
    """
    if spec.architecture.endswith("ForRewardModel"):
        return True
    if "AutoModelForSequenceClassification" in _remote_auto_classes(spec):
        return False
    return spec.is_decoder


def detect_model_kind(spec: ModelSpec, pooler: PoolerConfig | None = None) -> ModelKind:
    arch = spec.architecture
    convert = spec.convert
    step = pooler is not None and pooler.pooling_type == "STEP"
    if spec.colbert is not None:
        return ModelKind.COLBERT
    if convert == "embed":
        return ModelKind.EMBEDDING
    causal = _is_causal_lm(arch)
    vllm_recipe = causal or arch.endswith("ForSequenceClassification")
    if spec.classifier_from_token and convert in (None, "classify") and vllm_recipe:
        # vLLM's recipe: hf_overrides={"architectures": [...ForSequenceClassification],
        # "classifier_from_token": [...]} on a *ForCausalLM checkpoint means "score with these rows"
        return ModelKind.LM_HEAD_CLASSIFIER
    if convert == "classify" and not arch.endswith("ForSequenceClassification"):
        if not causal:
            raise ModelLoadError(
                f"convert='classify' reads a language-model head, but {arch} has none; "
                "it needs a *ForCausalLM checkpoint"
            )
        return ModelKind.LM_HEAD_CLASSIFIER
    if convert == "reward" or (causal and step):
        if not causal:
            raise ModelLoadError(f"convert='reward' needs a *ForCausalLM checkpoint, not {arch}")
        return ModelKind.STEP_REWARD
    if arch.endswith("ForSequenceClassification") or arch.endswith("ForRewardModel"):
        return ModelKind.DECODER_CLASSIFIER if _reads_last_token(spec) else ModelKind.SEQUENCE_CLASSIFIER
    if arch.endswith("ForProcessRewardModel") and spec.is_decoder:
        return ModelKind.STEP_REWARD
    if arch.endswith("ForTokenClassification") or arch.endswith("ForProcessRewardModel"):
        return ModelKind.TOKEN_CLASSIFIER
    if causal:
        if spec.is_sentence_transformers:  # gte-Qwen2 / Qwen3-Embedding: the folder says "embed"
            return ModelKind.EMBEDDING
        raise ModelLoadError(
            f"{arch} is a text-generation checkpoint; pass convert='embed' or convert='classify' "
            "to adapt it to a pooling task (or a STEP pooler_config for a process reward model)"
        )
    return ModelKind.EMBEDDING


def supported_tasks(kind: ModelKind, spec: ModelSpec, pooler: PoolerConfig | None = None) -> tuple[str, ...]:
    tasks = SUPPORTED_TASKS[kind]
    if kind in (ModelKind.SEQUENCE_CLASSIFIER, ModelKind.DECODER_CLASSIFIER) and spec.num_labels != 1:
        tasks = tuple(t for t in tasks if t not in ("score", "reward"))
    if kind is ModelKind.LM_HEAD_CLASSIFIER and spec.num_labels != 1:
        tasks = tuple(t for t in tasks if t != "score")
    pooling_type = (pooler or spec.pooler_defaults).pooling_type
    if kind is ModelKind.TOKEN_CLASSIFIER and pooling_type != "STEP":
        tasks = tuple(t for t in tasks if t != "reward")
    return tasks
