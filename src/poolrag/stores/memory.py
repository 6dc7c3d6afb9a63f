"""An in-process store, for adapters and tests that have no database: exact search in numpy.

It keeps the same collection contract as the database stores (a :class:`CollectionSpec` decides
the layout and refuses vectors of another model or size), so code written against it runs
unchanged on Milvus or Qdrant. Dense search is exact cosine; multivector search is exact MaxSim on
the stored token vectors (ColBERT's are unit length, so it equals the engine's ``score``). All
token vectors live in one packed matrix, rebuilt after a change, so a query is one matrix product
and one segmented max. Sparse search is exact inner product (times IDF from the stored vectors in
``bm25`` collections, as Qdrant's ``Modifier.IDF`` does), and hybrid search fuses the two with
the rules every store shares (:mod:`poolrag.stores.hybrid`). Suited to corpora of up to some tens
of thousands of chunks; the data lives as long as the object.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import ChunkRecord, CollectionSpec, PayloadPages, SourcePages, StoreHit
from poolrag.stores.filters import CheckedFilter, matches
from poolrag.stores.hybrid import document_frequencies, with_idf
from poolrag.stores.template import StoreTemplate
from poolrag.stores.vector_types import VECTOR_TYPES

logger = logging.getLogger(__name__)


class InMemoryStore(StoreTemplate):
    """One collection held in this process; re-upserting an id replaces that chunk."""

    name = "memory"
    vector_types = VECTOR_TYPES

    def __init__(self, collection: str = "default") -> None:
        super().__init__(collection, "this process")
        self._records: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
        self._sparse: dict[str, SparseVector] = {}
        self._tokens: dict[str, np.ndarray] = {}  # the token-vector field next to the dense one
        self._lock = threading.Lock()
        self._packed: tuple[list[str], np.ndarray, np.ndarray] | None = None

    def __repr__(self) -> str:
        return f"InMemoryStore({self.collection!r}, chunks={len(self._records)})"

    # -- collection ---------------------------------------------------------------------------------
    def _load_spec(self) -> CollectionSpec | None:
        return None  # the spec lives only in ``_spec``

    def _write_spec(self, spec: CollectionSpec) -> None:
        """Nothing to write: the template keeps the spec."""

    def _create(self, spec: CollectionSpec) -> None:
        logger.info("created in-memory collection %r (%s, %d dims)", spec.name, spec.layout, spec.dimension)

    # -- writes -------------------------------------------------------------------------------------
    def _upsert(self, spec: CollectionSpec, records: Sequence[ChunkRecord]) -> None:
        # copies: the caller may reuse its buffers (the template checked their shapes)
        rows = {r.id: (np.array(r.vector, dtype=np.float32), dict(r.payload)) for r in records}
        with self._lock:
            self._records.update(rows)
            self._sparse.update({r.id: r.sparse for r in records if r.sparse is not None})
            for r in records:
                if r.multivector is not None:  # a copy: the caller may reuse its buffer
                    self._tokens[r.id] = np.array(r.multivector, dtype=np.float32)
            self._packed = None

    def _delete(self, ids: list[str]) -> None:
        with self._lock:
            for chunk_id in ids:
                self._records.pop(chunk_id, None)
                self._sparse.pop(chunk_id, None)
                self._tokens.pop(chunk_id, None)
            self._packed = None

    # -- reads --------------------------------------------------------------------------------------
    def scan_sources(self, consume: SourcePages) -> None:
        with self._lock:
            pairs = [(cid, str(payload.get("source", ""))) for cid, (_, payload) in self._records.items()]
        consume(pairs)  # the records are in memory already: one page

    def scan_payloads(self, consume: PayloadPages) -> None:
        with self._lock:
            pairs = [
                (cid, {k: v for k, v in payload.items() if k != "text"})
                for cid, (_, payload) in self._records.items()
            ]
        consume(pairs)

    def count(self) -> int:
        return len(self._records)

    def _keep(self, ids: list[str], checked: CheckedFilter | None) -> np.ndarray:
        if checked is None:
            return np.ones(len(ids), dtype=bool)
        return np.fromiter((matches(self._records[i][1], checked) for i in ids), dtype=bool, count=len(ids))

    def _top(self, ids: list[str], scores: np.ndarray, keep: np.ndarray, limit: int) -> list[StoreHit]:
        order = [i for i in np.argsort(-scores, kind="stable") if keep[i]][:limit]
        return [StoreHit(ids[i], float(scores[i]), dict(self._records[ids[i]][1])) for i in order]

    def _search(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Exact cosine similarity over every chunk matching ``filter`` (dot product for compact
        vectors, as the Qdrant stores compare them)."""
        with self._lock:
            ids, matrix, _ = self._pack()
            if not ids:
                return []
            scores = matrix @ query
            if spec.vector_type == "float32":
                norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
                scores = scores / np.maximum(norms, 1e-12)
            return self._top(ids, scores, self._keep(ids, filter), limit)

    def _search_multivector(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Exact MaxSim (per query token its best chunk token, summed) over every matching chunk."""
        with self._lock:
            if spec.multivector_dimension is not None:  # the token-vector field next to the dense one
                ids = list(self._tokens)
                if not ids:
                    return []
                maxsim = ((query @ self._tokens[i].T).max(axis=1).sum() for i in ids)
                scores = np.fromiter(maxsim, dtype=np.float64, count=len(ids))
            else:
                ids, tokens, starts = self._pack()
                if not ids:
                    return []
                similarity = query @ tokens.T  # [query tokens, every stored token]
                scores = np.maximum.reduceat(similarity, starts, axis=1).sum(axis=0)
            return self._top(ids, scores, self._keep(ids, filter), limit)

    def _search_sparse(
        self, spec: CollectionSpec, query: SparseVector, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Exact inner product over the matching chunks that share a term with ``query``."""
        with self._lock:
            if spec.sparse == "bm25":
                query = with_idf(query, *document_frequencies(self._sparse.values()))
            terms = set(query.indices.tolist())
            scored = [
                (cid, query.dot(vector))
                for cid, vector in self._sparse.items()
                if terms.intersection(vector.indices.tolist()) and matches(self._records[cid][1], filter)
            ]
            scored.sort(key=lambda pair: -pair[1])
            return [StoreHit(cid, score, dict(self._records[cid][1])) for cid, score in scored[:limit]]

    def _pack(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Every chunk's vectors in one matrix, plus each chunk's first row (called under the lock)."""
        if self._packed is None:
            ids = list(self._records)
            dim = self._spec.dimension if self._spec else 0
            mats = [np.atleast_2d(self._records[i][0]) for i in ids]
            lengths = np.fromiter((len(m) for m in mats), dtype=np.int64, count=len(mats))
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if ids else lengths
            packed = np.concatenate(mats) if mats else np.zeros((0, dim), dtype=np.float32)
            self._packed = (ids, packed, starts)
        return self._packed

    def _fetch_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        with self._lock:
            return {i: self._records[i][0].copy() for i in ids if i in self._records}

    def _fetch_sparse(self, ids: list[str]) -> dict[str, SparseVector]:
        with self._lock:
            return {i: self._sparse[i] for i in ids if i in self._sparse}

    def close(self) -> None:
        """Nothing to release; the chunks stay readable until the object is dropped."""
