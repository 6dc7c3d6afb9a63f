"""vLLM's own output types, which :class:`poolrag.LLM` returns so vLLM code runs unchanged.

vLLM hands back ``embedding`` and ``probs`` as ``list[float]`` and ``data`` as a ``torch.Tensor``,
and code written for it leans on that: ``json.dumps(embedding)``, ``embedding + [0.0]`` (a
concatenation, where numpy would add element-wise), ``data.cpu()``. The Engine keeps numpy
(:mod:`poolrag.outputs`), the fast path for millions of vectors; :func:`to_vllm` converts one
Engine result at the front door.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

import poolrag.outputs as engine_outputs

if TYPE_CHECKING:
    import torch


@dataclass(slots=True)
class EmbeddingOutput:
    embedding: list[float]

    @staticmethod
    def from_base(pooling_output: PoolingOutput) -> EmbeddingOutput:
        """vLLM's conversion of ``encode``'s raw output: one vector, else a ``ValueError``."""
        return EmbeddingOutput(_rank_checked(pooling_output, 1, "a 1-D embedding vector").tolist())

    @property
    def hidden_size(self) -> int:
        return len(self.embedding)

    def __repr__(self) -> str:  # as vLLM's: the size, not thousands of floats in a log line
        return f"EmbeddingOutput(hidden_size={self.hidden_size})"


@dataclass(slots=True)
class ClassificationOutput:
    probs: list[float]

    @staticmethod
    def from_base(pooling_output: PoolingOutput) -> ClassificationOutput:
        return ClassificationOutput(_rank_checked(pooling_output, 1, "a 1-D probability vector").tolist())

    @property
    def num_classes(self) -> int:
        return len(self.probs)

    def __repr__(self) -> str:
        return f"ClassificationOutput(num_classes={self.num_classes})"


@dataclass(slots=True)
class ScoringOutput:
    score: float

    @staticmethod
    def from_base(pooling_output: PoolingOutput) -> ScoringOutput:
        return ScoringOutput(float(_rank_checked(pooling_output, 0, "a scalar score", squeeze=True).item()))


@dataclass(slots=True)
class PoolingOutput:
    """A task's raw data as a CPU tensor, typed as vLLM types it (``data.cpu()`` type-checks). The
    one exception is ``sparse_embed``, a poolrag task vLLM lacks: its numpy record array of
    :data:`poolrag.outputs.SPARSE_ENTRY`, which a tensor cannot hold."""

    data: torch.Tensor

    def __eq__(self, other: object) -> bool:
        """vLLM's: equal when every element is (a dataclass's field tuple comparison would ask a
        tensor for one truth value, a ``RuntimeError`` for more than one element)."""
        if not isinstance(other, self.__class__):
            return NotImplemented
        mine, theirs = self.data, other.data
        if isinstance(mine, np.ndarray) or isinstance(theirs, np.ndarray):  # sparse_embed's records
            return bool(np.array_equal(mine, theirs))
        return mine.shape == theirs.shape and bool((mine == theirs).all())


@dataclass(frozen=True, slots=True)
class LateChunk:
    """One chunk of a late-chunked text, as vLLM describes it: its tokens ``[start, end)`` and the
    characters they came from (``None`` for a chunk of special tokens only)."""

    token_range: tuple[int, int]
    char_range: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class LateChunkingMetadata:
    """``PoolingRequestOutput.late_chunking``: the chunks behind each row of ``outputs.data``."""

    chunk_size: int
    input_tokens: int
    chunks: list[LateChunk]

    @classmethod
    def of(cls, offsets: Sequence[tuple[int, int]], chunk_size: int) -> LateChunkingMetadata:
        """Chunks of ``chunk_size`` tokens over every token (special ones included), each with the
        span of the characters its tokens cover, from the tokenizer's ``offsets`` (a special
        token covers none)."""
        chunks = []
        for start in range(0, len(offsets), chunk_size):
            end = min(start + chunk_size, len(offsets))
            covered = [(a, b) for a, b in offsets[start:end] if a < b]
            chars = (min(a for a, _ in covered), max(b for _, b in covered)) if covered else None
            chunks.append(LateChunk((start, end), chars))
        return cls(chunk_size, len(offsets), chunks)


T = TypeVar("T", EmbeddingOutput, ClassificationOutput, ScoringOutput, PoolingOutput)


@dataclass(slots=True)
class PoolingRequestOutput(Generic[T]):
    """One prompt's result as vLLM gives it: always ``finished`` and without ``error`` (an offline
    call returns whole, or raises). The fields vLLM's constructor takes come first, in its order,
    so code that builds one positionally (a wrapper, a test double) builds the same object."""

    request_id: str
    outputs: T
    prompt_token_ids: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0
    finished: bool = True
    prompt: str | None = None
    error: None = None
    late_chunking: LateChunkingMetadata | None = None  # the chunks of a late-chunked text (vLLM's)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids)


# the classes vLLM's embed / classify / score return, so isinstance checks written for it hold
class EmbeddingRequestOutput(PoolingRequestOutput[EmbeddingOutput]):
    __slots__ = ()

    @classmethod
    def from_base(cls, request_output: PoolingRequestOutput[PoolingOutput]) -> EmbeddingRequestOutput:
        """``encode``'s result as ``embed`` gives it (vLLM's ``from_base``)."""
        return _typed(cls, request_output, EmbeddingOutput.from_base(request_output.outputs))


class ClassificationRequestOutput(PoolingRequestOutput[ClassificationOutput]):
    __slots__ = ()

    @classmethod
    def from_base(cls, request_output: PoolingRequestOutput[PoolingOutput]) -> ClassificationRequestOutput:
        return _typed(cls, request_output, ClassificationOutput.from_base(request_output.outputs))


class ScoringRequestOutput(PoolingRequestOutput[ScoringOutput]):
    __slots__ = ()

    @classmethod
    def from_base(cls, request_output: PoolingRequestOutput[PoolingOutput]) -> ScoringRequestOutput:
        return _typed(cls, request_output, ScoringOutput.from_base(request_output.outputs))


R = TypeVar("R", EmbeddingRequestOutput, ClassificationRequestOutput, ScoringRequestOutput)


def _typed(cls: type[R], base: PoolingRequestOutput[PoolingOutput], outputs: Any) -> R:
    return cls(
        request_id=base.request_id,
        outputs=outputs,
        prompt_token_ids=list(base.prompt_token_ids),
        prompt=base.prompt,
        num_cached_tokens=base.num_cached_tokens,
    )


def _rank_checked(pooling_output: PoolingOutput, rank: int, what: str, squeeze: bool = False) -> Any:
    """``encode``'s data of the rank a typed output holds; a ``ValueError`` naming it otherwise (a
    per-token matrix is not one vector). ``squeeze``: a one-element score row is its scalar."""
    data = pooling_output.data
    if squeeze and data.ndim == 1 and data.shape[0] == 1:
        data = data.reshape(())
    if data.ndim != rank:
        raise ValueError(f"pooled data should be {what}, not of shape {tuple(data.shape)}")
    return data


_REQUEST_OUTPUTS: dict[type, type[PoolingRequestOutput[Any]]] = {
    EmbeddingOutput: EmbeddingRequestOutput,
    ClassificationOutput: ClassificationRequestOutput,
    ScoringOutput: ScoringRequestOutput,
}


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


def to_vllm(
    results: list[engine_outputs.PoolingRequestOutput[Any]], request_ids: Iterator[int] | None = None
) -> list[PoolingRequestOutput[Any]]:
    """The Engine's numpy results as vLLM's types (lists of floats, tensors, ``finished=True``),
    numbered from ``request_ids`` where given (vLLM counts requests over an ``LLM``'s life)."""
    converted = []
    for r in results:
        outputs = _convert(r.outputs)
        converted.append(
            _REQUEST_OUTPUTS.get(type(outputs), PoolingRequestOutput)(
                request_id=r.request_id if request_ids is None else str(next(request_ids)),
                outputs=outputs,
                prompt_token_ids=list(r.prompt_token_ids),
                prompt=r.prompt,
            )
        )
    return converted
