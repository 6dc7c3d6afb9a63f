"""vLLM's own output types, which :class:`poolrag.LLM` returns so vLLM code runs unchanged.

vLLM hands back ``embedding`` and ``probs`` as ``list[float]`` and ``data`` as a ``torch.Tensor``,
and code written for it leans on that: ``json.dumps(embedding)``, ``embedding + [0.0]`` (a
concatenation, where numpy would add element-wise), ``data.cpu()``. The Engine keeps numpy
(:mod:`poolrag.outputs`), the fast path for millions of vectors; :func:`to_vllm` converts one
Engine result at the front door.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

import poolrag.outputs as engine_outputs

if TYPE_CHECKING:
    import torch


@dataclass(slots=True)
class EmbeddingOutput:
    embedding: list[float]

    @property
    def hidden_size(self) -> int:
        return len(self.embedding)


@dataclass(slots=True)
class ClassificationOutput:
    probs: list[float]

    @property
    def num_classes(self) -> int:
        return len(self.probs)


@dataclass(slots=True)
class ScoringOutput:
    score: float


@dataclass(slots=True)
class PoolingOutput:
    """A task's raw data as a CPU tensor; ``sparse_embed`` (no vLLM task) keeps its record array of
    :data:`poolrag.outputs.SPARSE_ENTRY`, which a tensor cannot hold."""

    data: torch.Tensor | np.ndarray


T = TypeVar("T", EmbeddingOutput, ClassificationOutput, ScoringOutput, PoolingOutput)


@dataclass(slots=True)
class PoolingRequestOutput(Generic[T]):
    """One prompt's result as vLLM gives it: always ``finished`` (an offline call returns whole)."""

    request_id: str
    outputs: T
    prompt_token_ids: list[int] = field(default_factory=list)
    prompt: str | None = None
    num_cached_tokens: int = 0
    finished: bool = True

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids)


EmbeddingRequestOutput = PoolingRequestOutput[EmbeddingOutput]
ClassificationRequestOutput = PoolingRequestOutput[ClassificationOutput]
ScoringRequestOutput = PoolingRequestOutput[ScoringOutput]


def _tensor(data: np.ndarray) -> Any:
    if data.dtype == engine_outputs.SPARSE_ENTRY:
        return data
    import torch

    return torch.from_numpy(np.array(data, copy=True))  # a copy: the Engine's arrays are batch views


def _convert(result: object) -> EmbeddingOutput | ClassificationOutput | ScoringOutput | PoolingOutput:
    if isinstance(result, engine_outputs.EmbeddingOutput):
        return EmbeddingOutput(result.embedding.tolist())
    if isinstance(result, engine_outputs.ClassificationOutput):
        return ClassificationOutput(result.probs.tolist())
    if isinstance(result, engine_outputs.ScoringOutput):
        return ScoringOutput(float(result.score))
    if isinstance(result, engine_outputs.PoolingOutput):
        return PoolingOutput(_tensor(result.data))
    raise TypeError(f"no vLLM output type for {type(result).__name__}")


def to_vllm(results: list[engine_outputs.PoolingRequestOutput[Any]]) -> list[PoolingRequestOutput[Any]]:
    """The Engine's numpy results as vLLM's types (lists of floats, tensors, ``finished=True``)."""
    return [
        PoolingRequestOutput(
            request_id=r.request_id,
            outputs=_convert(r.outputs),
            prompt_token_ids=list(r.prompt_token_ids),
            prompt=r.prompt,
        )
        for r in results
    ]
