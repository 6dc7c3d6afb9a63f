"""Which family a model belongs to, and therefore which tasks it can run."""

from __future__ import annotations

from enum import Enum

from poolrag.config.model_spec import ModelSpec
from poolrag.errors import ModelLoadError


class ModelKind(Enum):
    """The forward pass a family needs; one per loader branch."""

    EMBEDDING = "embedding"  # backbone hidden states -> pooled vectors
    COLBERT = "colbert"  # backbone hidden states -> projected per-token vectors
    SEQUENCE_CLASSIFIER = "sequence_classifier"  # *ForSequenceClassification logits
    TOKEN_CLASSIFIER = "token_classifier"  # *ForTokenClassification logits


SUPPORTED_TASKS: dict[ModelKind, tuple[str, ...]] = {
    ModelKind.EMBEDDING: ("embed", "score", "token_embed"),
    ModelKind.COLBERT: ("token_embed", "score"),
    ModelKind.SEQUENCE_CLASSIFIER: ("classify", "score", "reward"),
    ModelKind.TOKEN_CLASSIFIER: ("token_classify", "reward"),
}


def detect_model_kind(spec: ModelSpec) -> ModelKind:
    arch = spec.architecture
    if spec.colbert is not None:
        return ModelKind.COLBERT
    if arch.endswith("ForSequenceClassification") or arch.endswith("ForRewardModel"):
        return ModelKind.SEQUENCE_CLASSIFIER
    if arch.endswith("ForTokenClassification") or arch.endswith("ForProcessRewardModel"):
        return ModelKind.TOKEN_CLASSIFIER
    if arch.endswith("ForCausalLM") or arch.endswith("LMHeadModel"):
        raise ModelLoadError(
            f"{arch} is a text-generation checkpoint; pass convert='embed' or convert='classify' "
            "to adapt it to a pooling task"
        )
    return ModelKind.EMBEDDING


def supported_tasks(kind: ModelKind, spec: ModelSpec) -> tuple[str, ...]:
    tasks = SUPPORTED_TASKS[kind]
    if kind is ModelKind.SEQUENCE_CLASSIFIER and spec.num_labels != 1:
        tasks = tuple(t for t in tasks if t not in ("score", "reward"))
    if kind is ModelKind.TOKEN_CLASSIFIER and spec.pooler_defaults.pooling_type != "STEP":
        tasks = tuple(t for t in tasks if t != "reward")
    return tasks
