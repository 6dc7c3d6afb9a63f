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
    embedding: np.ndarray

    @property
    def hidden_size(self) -> int:
        return int(self.embedding.shape[-1])


@dataclass(slots=True)
class ClassificationOutput:
    probs: np.ndarray

    @property
    def num_classes(self) -> int:
        return int(self.probs.shape[-1])


@dataclass(slots=True)
class ScoringOutput:
    score: float


@dataclass(slots=True)
class PoolingOutput:
    """Raw pooled data: a vector, a per-token matrix, or per-step rewards."""

    data: np.ndarray


T = TypeVar("T", EmbeddingOutput, ClassificationOutput, ScoringOutput, PoolingOutput)


@dataclass(slots=True)
class PoolingRequestOutput(Generic[T]):
    """One input's result: ``outputs`` plus the token ids the model saw (for usage accounting)."""

    request_id: str
    outputs: T
    prompt_token_ids: list[int] = field(default_factory=list)
    prompt: str | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids)


EmbeddingRequestOutput = PoolingRequestOutput[EmbeddingOutput]
ClassificationRequestOutput = PoolingRequestOutput[ClassificationOutput]
ScoringRequestOutput = PoolingRequestOutput[ScoringOutput]
