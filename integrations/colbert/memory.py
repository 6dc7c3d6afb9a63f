"""An exact, in-memory ColBERT index for small corpora (up to some tens of thousands of chunks).

All documents' token vectors live in one contiguous matrix, so a query is one matrix product and a
segmented max, with no approximate candidate stage that could miss a document.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from integrations.colbert.index import Hit, MetadataFilter, check_batch, check_filter, matches
from poolrag import InvalidInputError


class InMemoryMultiVectorIndex:
    """Exact MaxSim over every stored document; re-adding an id replaces that document."""

    def __init__(self) -> None:
        self._docs: dict[str, tuple[str, np.ndarray, dict[str, Any]]] = {}
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._packed: tuple[list[str], np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._docs)

    def __repr__(self) -> str:
        return f"InMemoryMultiVectorIndex(documents={len(self)}, dim={self._dim})"

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: Sequence[np.ndarray],
        metadatas: Sequence[Mapping[str, Any]],
    ) -> None:
        dim = check_batch(ids, texts, vectors, metadatas)
        if not ids:
            return
        with self._lock:
            if self._dim is not None and dim != self._dim:
                raise InvalidInputError(f"this index holds {self._dim}-dim token vectors, got {dim}-dim ones")
            self._dim = dim
            for doc_id, text, matrix, metadata in zip(ids, texts, vectors, metadatas, strict=True):
                self._docs[doc_id] = (text, np.asarray(matrix, dtype=np.float32), dict(metadata))
            self._packed = None

    def delete(self, ids: Sequence[str]) -> None:
        with self._lock:
            for doc_id in ids:
                self._docs.pop(doc_id, None)
            self._packed = None

    def _pack(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        # One [sum(T), D] matrix plus each document's first row, rebuilt only after a change.
        if self._packed is None:
            ids = list(self._docs)
            matrices = [self._docs[i][1] for i in ids]
            lengths = np.fromiter((len(m) for m in matrices), dtype=np.int64, count=len(matrices))
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(ids) else np.zeros(0, np.int64)
            tokens = np.concatenate(matrices) if matrices else np.zeros((0, self._dim or 0), np.float32)
            self._packed = (ids, tokens, starts)
        return self._packed

    def search(self, query: np.ndarray, k: int, filter: MetadataFilter | None = None) -> list[Hit]:
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        wanted = check_filter(filter)
        query = np.asarray(query, dtype=np.float32)
        with self._lock:
            if not self._docs:
                return []
            if query.ndim != 2 or query.shape[1] != self._dim:
                raise InvalidInputError(
                    f"query must be a [tokens, {self._dim}] matrix, got shape {query.shape}"
                )
            ids, tokens, starts = self._pack()
            similarity = query @ tokens.T  # [query tokens, all document tokens]
            scores = np.maximum.reduceat(similarity, starts, axis=1).sum(axis=0)
            keep = [i for i, doc_id in enumerate(ids) if matches(self._docs[doc_id][2], wanted)]
            best = sorted(keep, key=lambda i: (-scores[i], i))[:k]
            return [Hit(ids[i], float(scores[i]), *self._hit_fields(ids[i])) for i in best]

    def _hit_fields(self, doc_id: str) -> tuple[str, dict[str, Any]]:
        text, _, metadata = self._docs[doc_id]
        return text, dict(metadata)
