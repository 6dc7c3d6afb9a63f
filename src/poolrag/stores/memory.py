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

from poolrag.errors import InvalidInputError
from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import (
    ChunkRecord,
    CollectionSpec,
    HybridFusion,
    StoreHit,
    check_update,
    ensure_against,
)
from poolrag.stores.errors import CollectionNotFoundError
from poolrag.stores.filters import MetadataFilter, check_filter, matches
from poolrag.stores.hybrid import (
    check_fusion,
    check_limit,
    check_query_sparse,
    check_record_fields,
    document_frequencies,
    local_fusion,
    prefetch_depth,
    require_sparse,
    with_idf,
)
from poolrag.stores.language_prior import collection_default_fusion
from poolrag.stores.names import check_collection_name

logger = logging.getLogger(__name__)


class InMemoryStore:
    """One collection held in this process; re-upserting an id replaces that chunk."""

    name = "memory"

    def __init__(self, collection: str = "default") -> None:
        self.collection = check_collection_name(collection)
        self.location = "this process"
        self._spec: CollectionSpec | None = None
        self._records: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
        self._sparse: dict[str, SparseVector] = {}
        self._tokens: dict[str, np.ndarray] = {}  # the token-vector field next to the dense one
        self._lock = threading.Lock()
        self._packed: tuple[list[str], np.ndarray, np.ndarray] | None = None

    def __repr__(self) -> str:
        return f"InMemoryStore({self.collection!r}, chunks={len(self._records)})"

    # -- collection ---------------------------------------------------------------------------------
    def read_spec(self) -> CollectionSpec | None:
        return self._spec

    def ensure_collection(self, spec: CollectionSpec) -> CollectionSpec:
        self._spec = ensure_against(self, spec, self._create)
        return self._spec

    def update_spec(self, spec: CollectionSpec) -> None:
        check_update(self, spec)
        self._spec = spec

    def _create(self, spec: CollectionSpec) -> None:
        self._spec = spec
        logger.info("created in-memory collection %r (%s, %d dims)", spec.name, spec.layout, spec.dimension)

    def _require_spec(self) -> CollectionSpec:
        if self._spec is None:
            raise CollectionNotFoundError(f"in-memory collection {self.collection!r} has not been created")
        return self._spec

    # -- writes -------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        if not records:
            return
        spec = self._require_spec()
        for record in records:
            check_record_fields(spec, record)
        rows = {r.id: (self._checked_vector(spec, r), dict(r.payload)) for r in records}
        with self._lock:
            self._records.update(rows)
            self._sparse.update({r.id: r.sparse for r in records if r.sparse is not None})
            for r in records:
                if r.multivector is not None:  # a copy: the caller may reuse its buffer
                    self._tokens[r.id] = np.array(r.multivector, dtype=np.float32)
            self._packed = None

    @staticmethod
    def _checked_vector(spec: CollectionSpec, record: ChunkRecord) -> np.ndarray:
        vector = np.array(record.vector, dtype=np.float32)  # a copy: the caller may reuse its buffer
        ndim = 2 if spec.layout == "multivector" else 1
        if vector.ndim != ndim or vector.shape[-1] != spec.dimension or vector.size == 0:
            shape = "[tokens, dim]" if ndim == 2 else "[dim]"
            raise InvalidInputError(
                f"chunk {record.id!r}: collection {spec.name!r} holds {shape} vectors of size "
                f"{spec.dimension}, got shape {vector.shape}"
            )
        return vector

    def delete(self, ids: Sequence[str]) -> None:
        with self._lock:
            for chunk_id in ids:
                self._records.pop(chunk_id, None)
                self._sparse.pop(chunk_id, None)
                self._tokens.pop(chunk_id, None)
            self._packed = None

    # -- reads --------------------------------------------------------------------------------------
    def list_sources(self) -> dict[str, str]:
        with self._lock:
            return {cid: str(payload.get("source", "")) for cid, (_, payload) in self._records.items()}

    def count(self) -> int:
        return len(self._records)

    def _keep(self, ids: list[str], filter: MetadataFilter | None) -> np.ndarray:
        checked = check_filter(filter)
        if checked is None:
            return np.ones(len(ids), dtype=bool)
        return np.fromiter((matches(self._records[i][1], checked) for i in ids), dtype=bool, count=len(ids))

    def _top(self, ids: list[str], scores: np.ndarray, keep: np.ndarray, limit: int) -> list[StoreHit]:
        order = [i for i in np.argsort(-scores, kind="stable") if keep[i]][:limit]
        return [StoreHit(ids[i], float(scores[i]), dict(self._records[ids[i]][1])) for i in order]

    def search(self, vector: np.ndarray, limit: int, filter: MetadataFilter | None = None) -> list[StoreHit]:
        """Exact cosine similarity over every chunk matching ``filter``."""
        spec = self._require_spec()
        if spec.layout != "dense":
            raise InvalidInputError(f"collection {spec.name!r} holds token vectors; use search_multivector")
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (spec.dimension,):
            raise InvalidInputError(f"query must be a [{spec.dimension}] vector, got shape {query.shape}")
        with self._lock:
            ids, matrix, _ = self._pack()
            if not ids:
                return []
            norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
            scores = (matrix @ query) / np.maximum(norms, 1e-12)
            return self._top(ids, scores, self._keep(ids, filter), limit)

    def search_multivector(
        self, vectors: np.ndarray, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Exact MaxSim (per query token its best chunk token, summed) over every matching chunk."""
        spec = self._require_spec()
        if spec.layout != "multivector" and spec.multivector_dimension is None:
            raise InvalidInputError(f"collection {spec.name!r} holds single vectors; use search")
        size = spec.multivector_dimension or spec.dimension
        query = np.asarray(vectors, dtype=np.float32)
        if query.ndim != 2 or query.shape[1] != size:
            raise InvalidInputError(f"query must be a [tokens, {size}] matrix, got shape {query.shape}")
        if spec.multivector_dimension is not None:  # the token-vector field next to the dense one
            with self._lock:
                ids = list(self._tokens)
                if not ids or len(query) == 0:
                    return []
                maxsim = ((query @ self._tokens[i].T).max(axis=1).sum() for i in ids)
                scores = np.fromiter(maxsim, dtype=np.float64, count=len(ids))
                return self._top(ids, scores, self._keep(ids, filter), limit)
        with self._lock:
            ids, tokens, starts = self._pack()
            if not ids or len(query) == 0:
                return []
            similarity = query @ tokens.T  # [query tokens, every stored token]
            scores = np.maximum.reduceat(similarity, starts, axis=1).sum(axis=0)
            return self._top(ids, scores, self._keep(ids, filter), limit)

    def search_sparse(
        self, sparse: SparseVector, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Exact inner product over the matching chunks that share a term with ``sparse``."""
        spec = require_sparse(self._require_spec(), f"{self.name} at {self.location}")
        query = check_query_sparse(sparse)
        check_limit(limit)
        checked = check_filter(filter)
        with self._lock:
            if spec.sparse == "bm25":
                query = with_idf(query, *document_frequencies(self._sparse.values()))
            terms = set(query.indices.tolist())
            scored = [
                (cid, query.dot(vector))
                for cid, vector in self._sparse.items()
                if terms.intersection(vector.indices.tolist()) and matches(self._records[cid][1], checked)
            ]
            scored.sort(key=lambda pair: -pair[1])
            return [StoreHit(cid, score, dict(self._records[cid][1])) for cid, score in scored[:limit]]

    def search_hybrid(
        self,
        dense: np.ndarray,
        sparse: SparseVector,
        limit: int,
        *,
        filter: MetadataFilter | None = None,
        fusion: HybridFusion | None = None,
        prefetch: int | None = None,
    ) -> list[StoreHit]:
        """Both legs, ``prefetch`` deep, fused by ``fusion`` (the rules of :mod:`poolrag.stores.hybrid`)."""
        spec = require_sparse(self._require_spec(), f"{self.name} at {self.location}")
        fusion = check_fusion(collection_default_fusion(spec) if fusion is None else fusion)
        depth = prefetch_depth(limit, prefetch)
        return local_fusion(self, dense, sparse, limit, depth, filter, fusion)

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

    def fetch_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            return {i: self._records[i][0].copy() for i in ids if i in self._records}

    def fetch_sparse(self, ids: Sequence[str]) -> dict[str, SparseVector]:
        require_sparse(self._require_spec(), f"{self.name} at {self.location}")
        with self._lock:
            return {i: self._sparse[i] for i in ids if i in self._sparse}

    def close(self) -> None:
        """Nothing to release; the chunks stay readable until the object is dropped."""
