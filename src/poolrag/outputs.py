"""Result objects, shaped like vLLM's so its users feel at home.

Vectors are numpy ``float32`` arrays (views into the batch result), never Python lists: an
ingestion job of millions of chunks must not build lists of floats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np


@dataclass(slots=True)
class EmbeddingOutput:
    """One input's vector: a float32 ``[D]`` array (``D`` the model's size, or the ``dimensions`` asked)."""

    embedding: np.ndarray

    @property
    def hidden_size(self) -> int:
        """The vector's length, as vLLM's ``EmbeddingOutput.hidden_size``."""
        return int(self.embedding.shape[-1])


@dataclass(slots=True)
class ClassificationOutput:
    """One input's label scores: one per label (activated unless ``use_activation=False``)."""

    probs: np.ndarray

    @property
    def num_classes(self) -> int:
        """How many labels ``probs`` scores, as vLLM's ``ClassificationOutput.num_classes``."""
        return int(self.probs.shape[-1])


@dataclass(slots=True)
class ScoringOutput:
    """One pair's relevance score (a Python float)."""

    score: float


@dataclass(slots=True)
class PoolingOutput:
    """Raw pooled data: a vector, a per-token matrix, per-step rewards, or for ``sparse_embed`` a
    record array of :data:`SPARSE_ENTRY` (token id, weight)."""

    data: np.ndarray


# ``sparse_embed`` results inside the pipeline and in ``encode``'s PoolingOutput.data: one record
# per non-zero weight, sorted by token id (the engine's sparse methods turn them into SparseVector).
SPARSE_ENTRY = np.dtype([("index", np.int32), ("value", np.float32)])


T = TypeVar("T", EmbeddingOutput, ClassificationOutput, ScoringOutput, PoolingOutput)


@dataclass(slots=True)
class PoolingRequestOutput(Generic[T]):
    """One input's result: ``outputs`` plus the token ids the model saw (for usage accounting) and
    whether the input was cut to fit the model's length (``truncated``, counted in answers)."""

    request_id: str
    outputs: T
    prompt_token_ids: list[int] = field(default_factory=list)
    prompt: str | None = None
    truncated: bool = False
    image_tokens: int = 0  # an image input: the patches (and class token) its encoder read

    @property
    def num_tokens(self) -> int:
        """Tokens the model read for this input (its text's and an image's), for usage accounting."""
        return len(self.prompt_token_ids) + self.image_tokens
