"""A sparse vector as one row of a Milvus ``SPARSE_FLOAT_VECTOR`` field, and back.

Milvus refuses a row whose weights are all zero (``sparse vector must contain at least one nonzero
float32 weight``), yet a chunk can have no term: BM25 drops punctuation and special tokens, and a
learned model can weigh every token of a short text at zero. Such a row holds one marker term that
no query carries, with a weight too small to move any score, so poolrag's Milvus store and the
framework adapters that write Milvus rows (LangChain's and LlamaIndex's) write the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping

from poolrag.sparse.vector import SparseVector

#: The one term of a row without terms: the largest id Milvus takes, never a vocabulary's.
EMPTY_TERM = 2**31 - 1
EMPTY_WEIGHT = 1e-30


def milvus_sparse_row(vector: SparseVector) -> dict[int, float]:
    """The row Milvus stores: the non-zero weights, or the marker term when there is none."""
    weights = {t: w for t, w in vector.to_dict().items() if w != 0.0}
    return weights or {EMPTY_TERM: EMPTY_WEIGHT}


def from_milvus_sparse_row(row: Mapping[int, float]) -> SparseVector:
    """The stored vector without the marker term (a chunk without terms comes back empty)."""
    weights = {int(t): float(w) for t, w in dict(row).items() if int(t) != EMPTY_TERM}
    return SparseVector.from_dict(weights)
