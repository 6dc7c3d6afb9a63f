"""Which kind a model folder is, and therefore which tasks it can run.

The name-to-role table and each kind's tasks live in ``registry``; this module adds what the
name alone cannot say: the folder's layout, ``convert`` and the pooler configuration.
"""

from __future__ import annotations

from poolrag.config.model_spec import ModelSpec
from poolrag.config.pooler_config import PoolerConfig
from poolrag.config.registry import (
    KINDS,
    TOKEN_CLASSIFY_HEADS,
    VLLM_SPARSE_NAMES,
    ModelKind,
    Role,
    reward_alias_tasks,
    reward_head_token_tasks,
)
from poolrag.errors import GenerativeCheckpointError, ModelLoadError
from poolrag.model_facts import ScoreKind

__all__ = ["ModelKind", "detect_model_kind", "pooled_task_score", "supported_tasks", "task_aliases"]

#: what ``score`` computes when the pooler config names the task the model is pooled for, as vLLM's
#: score type follows its ``PoolerConfig.task`` (bi-encoder, late interaction, cross-encoder)
TASK_SCORE_KINDS: dict[str, ScoreKind] = {
    "embed": ScoreKind.COSINE,
    "token_embed": ScoreKind.MAXSIM,
    "classify": ScoreKind.CROSS_ENCODER,
}


def _head_after_pooling(spec: ModelSpec) -> bool:
    """Classifiers whose head we can apply to the pooled row ourselves.

    transformers' own ``*ForSequenceClassification`` of a causal model type (the last real token),
    remote-code ``*ForRewardModel`` heads (Qwen2-Math-RM style), and a bidirectional Llama run on
    transformers' layers (its trained pooling); other remote classifiers keep their own forward.
    """
    if spec.role is Role.REWARD_HEAD or spec.bidirectional:
        return True
    if "AutoModelForSequenceClassification" in (getattr(spec.hf_config, "auto_map", None) or {}):
        return False
    return spec.is_decoder


def _check_token_classify_head(spec: ModelSpec) -> None:
    """``convert='classify'`` adds ``token_classify`` to an encoder classifier: its head on every
    token. Only families whose head poolrag knows how to apply per token qualify; a classifier
    that keeps its own forward (remote code, bidirectional Llama) has no head to apply."""
    model_type = getattr(spec.hf_config, "model_type", "")
    if getattr(spec.hf_config, "auto_map", None):
        why = "its folder's own code computes the scores"
    elif model_type not in TOKEN_CLASSIFY_HEADS:
        why = f"no per-token head for model_type {model_type!r}"
    else:
        return
    raise ModelLoadError(
        f"convert='classify' adds token_classify (the classifier head on every token), but {why}; "
        f"supported: {', '.join(TOKEN_CLASSIFY_HEADS)}; load {spec.architecture} without convert"
    )


#: vLLM's ``hf_overrides["method"]`` for a converted classifier: how its token rows become scores
_VLLM_CLASSIFIER_METHODS = ("from_2_way_softmax", "no_post_processing")


def _check_vllm_classifier_overrides(spec: ModelSpec) -> None:
    """vLLM's reranker overrides, refused where vLLM refuses them: a wrong one would load and
    score something else. poolrag reads the score from the number of tokens (two: softmax of the
    pair; one: sigmoid), which is what both methods give for the counts they take."""
    cfg = spec.hf_config
    tokens = spec.classifier_from_token or ()
    original_qwen3 = getattr(cfg, "is_original_qwen3_reranker", False)
    if not tokens and not original_qwen3:
        return  # not a converted classifier: a "method" key there is the checkpoint's own
    method = getattr(cfg, "method", None)
    if method is not None and method not in _VLLM_CLASSIFIER_METHODS:
        raise ModelLoadError(
            f"hf_overrides method {method!r} is not one of vLLM's: {', '.join(_VLLM_CLASSIFIER_METHODS)}"
        )
    if method == "from_2_way_softmax" and len(tokens) != 2:
        raise ModelLoadError(
            "hf_overrides method 'from_2_way_softmax' needs two classifier_from_token entries "
            f"(negative first, positive last), not {len(tokens)}"
        )
    if original_qwen3 and len(tokens) != 2:
        raise ModelLoadError(
            "hf_overrides is_original_qwen3_reranker needs the Qwen3-Reranker's two answer tokens: "
            'add "classifier_from_token": ["no", "yes"]'
        )


#: kinds that embed as they are, with what they embed (said when a ``convert`` is refused)
_AS_IT_IS = {
    Role.DUAL_ENCODER: (ModelKind.DUAL_ENCODER, "texts and images"),
    Role.PAGE_RETRIEVER: (ModelKind.PAGE_RETRIEVER, "queries and pages"),
}


def detect_model_kind(spec: ModelSpec, pooler: PoolerConfig | None = None) -> ModelKind:
    """Decided in this order, so a folder that fits two is refused or run as the first says: a
    kind fixed by its name, a multi-vector or sparse layout, ``convert``, then the name's head."""
    if spec.role in _AS_IT_IS:
        kind, inputs = _AS_IT_IS[spec.role]
        if spec.convert is not None:
            raise ModelLoadError(
                f"{spec.architecture} embeds {inputs} as it is; convert={spec.convert!r} does not apply"
            )
        return kind
    if spec.colbert is not None:
        return ModelKind.COLBERT
    if (lexical := _lexical_kind(spec, pooler)) is not None:
        return lexical
    if spec.convert == "embed":
        return ModelKind.EMBEDDING
    _check_vllm_classifier_overrides(spec)
    if (converted := _converted_kind(spec, pooler)) is not None:
        return converted
    return _head_kind(spec)


def _lexical_kind(spec: ModelSpec, pooler: PoolerConfig | None) -> ModelKind | None:
    """SPLADE or BGE-M3, as the folder's modules, the pooler or vLLM's class name
    (``BertSpladeSparseEmbeddingModel`` / ``BgeM3EmbeddingModel``) ask."""
    arch = spec.architecture
    named = VLLM_SPARSE_NAMES.get(arch)
    splade_pooling = pooler is not None and pooler.pooling_type == "SPLADE"
    if spec.splade is not None or splade_pooling or named is ModelKind.SPLADE:
        if spec.role is not Role.BACKBONE or not (arch.endswith("ForMaskedLM") or named is ModelKind.SPLADE):
            raise ModelLoadError(f"SPLADE pooling reads a masked-LM head; {arch} is not a *ForMaskedLM")
        return ModelKind.SPLADE
    if named is ModelKind.BGE_M3 and spec.lexical_heads is None:
        raise ModelLoadError(
            f"{arch} needs BGE-M3's sparse_linear.pt and colbert_linear.pt next to the weights in {spec.path}"
        )
    if spec.lexical_heads is not None and spec.convert is None and spec.role is Role.BACKBONE:
        return ModelKind.BGE_M3
    return None


def _converted_kind(spec: ModelSpec, pooler: PoolerConfig | None) -> ModelKind | None:
    """A classifier or process reward model made from a language-model head, by ``convert``, vLLM's
    ``classifier_from_token`` or a STEP pooler; ``None`` where the name's own head decides."""
    arch, role, convert = spec.architecture, spec.role, spec.convert
    causal = role is Role.LM_HEAD
    sequence_head = role is Role.SEQUENCE_HEAD
    if spec.classifier_from_token and convert in (None, "classify") and (causal or sequence_head):
        # vLLM's recipe: hf_overrides={"architectures": [...ForSequenceClassification],
        # "classifier_from_token": [...]} on a *ForCausalLM checkpoint means "score with these rows"
        return ModelKind.LM_HEAD_CLASSIFIER
    if convert == "classify" and not sequence_head and role is not Role.REWARD_HEAD:
        if not causal:
            raise ModelLoadError(
                f"convert='classify' reads a language-model head, but {arch} has none; "
                "it needs a *ForCausalLM checkpoint"
            )
        return ModelKind.LM_HEAD_CLASSIFIER
    if convert == "reward" and role in (Role.REWARD_HEAD, Role.PROCESS_REWARD_HEAD, Role.TOKEN_HEAD):
        convert = None  # already a reward model: vLLM's convert="reward" asks for nothing more
    step = pooler is not None and pooler.pooling_type == "STEP"
    if convert == "reward" or (causal and step):
        if not causal:
            raise ModelLoadError(f"convert='reward' needs a *ForCausalLM checkpoint, not {arch}")
        return ModelKind.STEP_REWARD
    return None


def _head_kind(spec: ModelSpec) -> ModelKind:
    """What the head the architecture's name says makes of it, unconverted."""
    role = spec.role
    if role in (Role.SEQUENCE_HEAD, Role.REWARD_HEAD):
        if _head_after_pooling(spec):
            return ModelKind.SCORE_HEAD_CLASSIFIER
        if spec.convert == "classify":
            _check_token_classify_head(spec)
        return ModelKind.SEQUENCE_CLASSIFIER
    if role is Role.PROCESS_REWARD_HEAD and spec.is_decoder:
        return ModelKind.STEP_REWARD
    if role in (Role.TOKEN_HEAD, Role.PROCESS_REWARD_HEAD):
        return ModelKind.TOKEN_CLASSIFIER
    if role is Role.LM_HEAD:
        if spec.is_sentence_transformers:  # gte-Qwen2 / Qwen3-Embedding: the folder says "embed"
            return ModelKind.EMBEDDING
        raise GenerativeCheckpointError(
            f"{spec.architecture} is a text-generation checkpoint; pass convert='embed' or "
            "convert='classify' to adapt it to a pooling task (or a STEP pooler_config for a process "
            "reward model)"
        )
    return ModelKind.EMBEDDING


def supported_tasks(kind: ModelKind, spec: ModelSpec) -> tuple[str, ...]:
    """The kind's tasks, less those its head cannot serve, plus those ``convert`` adds (see ``KindInfo``)."""
    info = KINDS[kind]
    dropped = info.one_label_tasks if spec.num_labels != 1 else ()
    tasks = tuple(t for t in info.tasks if t not in dropped)
    if spec.convert == "classify":
        added = info.classify_tasks
    else:
        added = reward_head_token_tasks(kind, spec.role) + tuple(task_aliases(kind, spec))
    return tasks + tuple(t for t in added if t not in tasks)


def task_aliases(kind: ModelKind, spec: ModelSpec) -> dict[str, str]:
    """Tasks answered by another task's pooler: a process reward model's ``token_classify`` is its
    ``reward`` (vLLM runs ``LLM.reward`` as ``encode(pooling_task="token_classify")``), unless
    ``convert='classify'`` made it a classifier of its tokens."""
    if spec.convert == "classify":
        return {}
    info = KINDS[kind]
    tasks = tuple(t for t in info.tasks if spec.num_labels == 1 or t not in info.one_label_tasks)
    return dict.fromkeys(reward_alias_tasks(kind, spec.role, tasks), "reward")


def pooled_task_score(kind: ModelKind, tasks: tuple[str, ...], pooler: PoolerConfig) -> ScoreKind:
    """How ``score`` works: as the pooler config's ``task`` says (``token_embed``: MaxSim over the
    token vectors, as vLLM's late interaction), else as the kind does. A task the model does not
    run is refused, as vLLM refuses it."""
    task = pooler.task
    if task is None:
        return kind.score_kind
    if task not in tasks:
        # vLLM offers a sequence classifier's token_classify unasked; here convert='classify' adds it
        hint = "; load it with convert='classify'" if task == "token_classify" and "classify" in tasks else ""
        raise ModelLoadError(
            f"pooler_config task {task!r} is not one this model runs; it runs: {', '.join(tasks)}{hint}"
        )
    return TASK_SCORE_KINDS.get(task, kind.score_kind)
