"""The storage side of ColBERT retrieval: what a multi-vector index must do, framework-free.

A document is a ``[T, D]`` matrix of token vectors, not one vector, and relevance is MaxSim (for
each query token its best document token, summed). Indexes store those matrices with the text and
metadata and return the best ``k`` documents for a query matrix; the LangChain and LlamaIndex
retrievers sit on top of any of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from poolrag import InvalidInputError

#: A metadata filter: every key must match; a list/tuple/set value matches any of its members.
MetadataFilter = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved document with its MaxSim score."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class MultiVectorIndex(Protocol):
    """Stores per-token document matrices and answers MaxSim top-k queries."""

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: Sequence[np.ndarray],
        metadatas: Sequence[Mapping[str, Any]],
    ) -> None: ...

    def search(self, query: np.ndarray, k: int, filter: MetadataFilter | None = None) -> list[Hit]: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def __len__(self) -> int: ...


def check_filter(filter: MetadataFilter | None) -> dict[str, Any]:
    """A validated copy of ``filter`` with any-of values turned into lists."""
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise InvalidInputError(
            f"filter must be a mapping of metadata key to value, not {type(filter).__name__}"
        )
    checked: dict[str, Any] = {}
    for key, value in filter.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"filter keys must be non-empty strings, got {key!r}")
        if isinstance(value, (list, tuple, set, frozenset)):
            if not value:
                raise InvalidInputError(f"filter value for {key!r} is an empty list: nothing could match")
            value = list(value)
        elif isinstance(value, Mapping):
            raise InvalidInputError(f"filter value for {key!r} must be a scalar or a list of scalars")
        checked[key] = value
    return checked


def matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` satisfies a :func:`check_filter`-ed filter."""
    for key, wanted in filter.items():
        if key not in metadata:
            return False
        value = metadata[key]
        if isinstance(wanted, list):
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True


def check_batch(
    ids: Sequence[str],
    texts: Sequence[str],
    vectors: Sequence[np.ndarray],
    metadatas: Sequence[Mapping[str, Any]],
) -> int:
    """Validate one ``add`` call's columns and return the token-vector size they share."""
    n = len(ids)
    if not (len(texts) == len(vectors) == len(metadatas) == n):
        raise InvalidInputError(
            f"ids, texts, vectors and metadatas must have equal lengths, got "
            f"{n}, {len(texts)}, {len(vectors)}, {len(metadatas)}"
        )
    if len(set(ids)) != n:
        raise InvalidInputError("ids must be unique within one call")
    dims = {int(np.shape(v)[-1]) for v in vectors if np.ndim(v) == 2}
    if any(np.ndim(v) != 2 or np.shape(v)[0] == 0 for v in vectors):
        raise InvalidInputError("each document must be a non-empty [tokens, dim] matrix of token vectors")
    if len(dims) > 1:
        raise InvalidInputError(f"token vectors of one index must share one size, got {sorted(dims)}")
    return dims.pop() if dims else 0
