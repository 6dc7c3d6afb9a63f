"""One sparse vector: token id → weight, in the index/value array form both stores take.

Qdrant's ``SparseVector(indices, values)`` and Milvus' sparse float vectors both want unique
non-negative indices with one value each; sorting them makes two vectors comparable element by
element and the dot product a linear merge. The arrays are made read-only so that a vector kept
in a cache cannot be changed behind the cache's back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from poolrag.errors import InvalidInputError

_MAX_INDEX = np.iinfo(np.int32).max


@dataclass(frozen=True, eq=False)
class SparseVector:
    """Sorted unique ``int32`` token ids and their ``float32`` weights (finite; zeros allowed)."""

    indices: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        raw_indices = np.asarray(self.indices)
        raw_values = np.asarray(self.values)
        if raw_indices.ndim != 1 or raw_values.ndim != 1:
            raise InvalidInputError("sparse indices and values must be 1-D arrays")
        if raw_indices.shape != raw_values.shape:
            raise InvalidInputError(f"{raw_indices.size} sparse indices for {raw_values.size} values")
        if raw_indices.size and not np.issubdtype(raw_indices.dtype, np.integer):
            raise InvalidInputError(f"sparse indices must be integers, got {raw_indices.dtype}")
        if raw_indices.size and (raw_indices.min() < 0 or raw_indices.max() > _MAX_INDEX):
            raise InvalidInputError("sparse indices must be in [0, 2**31 - 1]")
        indices = raw_indices.astype(np.int32)
        values = raw_values.astype(np.float32)
        if indices.size > 1 and not np.all(indices[1:] > indices[:-1]):
            raise InvalidInputError("sparse indices must be sorted and unique; use SparseVector.from_dict")
        if not np.all(np.isfinite(values)):
            raise InvalidInputError("sparse values must be finite")
        indices.flags.writeable = False
        values.flags.writeable = False
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "values", values)

    @classmethod
    def from_dict(cls, weights: Mapping[int, float]) -> SparseVector:
        """From a token id → weight mapping in any order."""
        indices = np.fromiter(weights.keys(), dtype=np.int64, count=len(weights))
        values = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
        order = np.argsort(indices, kind="stable")
        return cls(indices[order], values[order])

    @classmethod
    def empty(cls) -> SparseVector:
        return cls(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))

    def to_dict(self) -> dict[int, float]:
        """Token id → weight, the shape of sentence-transformers' and TEI's sparse outputs."""
        return dict(zip(self.indices.tolist(), self.values.tolist(), strict=True))

    def dot(self, other: SparseVector) -> float:
        """Inner product, what a store computes between a query and a document vector."""
        _, mine, theirs = np.intersect1d(self.indices, other.indices, assume_unique=True, return_indices=True)
        return float(np.dot(self.values[mine].astype(np.float64), other.values[theirs].astype(np.float64)))

    def __len__(self) -> int:
        return int(self.indices.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SparseVector):
            return NotImplemented
        return np.array_equal(self.indices, other.indices) and np.array_equal(self.values, other.values)

    def __hash__(self) -> int:
        return hash((self.indices.tobytes(), self.values.tobytes()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{i}: {v:.4g}" for i, v in list(self.to_dict().items())[:6])
        more = ", ..." if len(self) > 6 else ""
        return f"SparseVector({{{shown}{more}}}, nnz={len(self)})"
