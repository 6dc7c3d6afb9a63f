"""Qdrant Edge store (qdrant-edge-py): Qdrant's Rust engine running inside this process.

No server and no client/server hop: a shard is a folder. An edge shard has no collection
metadata of its own, so poolrag's description sits next to it in ``poolrag.json`` (written
atomically, before the shard is created, so a shard without it is never left behind by poolrag).
Layout on disk: ``<path>/<collection>/shard`` and ``<path>/<collection>/poolrag.json``.

A collection with a sparse field holds named ``dense`` and ``sparse`` vectors (``Modifier.Idf``
for BM25) and fuses hybrid searches as the Qdrant store does (RRF and DBSF in the shard); one
without keeps the unnamed vector it always had. IDF is measured over the live points (an
``IdfParams`` corpus that matches every point): the shard's global statistics go on counting
deleted points until it is optimised, and BM25 must not change with what was deleted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

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
from poolrag.stores.errors import CollectionMismatchError, CollectionNotFoundError
from poolrag.stores.filters import CheckedFilter, MetadataFilter, check_filter
from poolrag.stores.hybrid import (
    RRF_K,
    check_fusion,
    check_limit,
    check_query_sparse,
    check_record_fields,
    local_fusion,
    prefetch_depth,
    require_sparse,
)
from poolrag.stores.language_prior import collection_default_fusion
from poolrag.stores.local_paths import check_writable_folder
from poolrag.stores.names import check_collection_name
from poolrag.stores.retry import RetryPolicy

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PATH = "./poolrag_edge"
_SPEC_FILE = "poolrag.json"
_PAGE = 1000
DENSE_NAME = "dense"  # the named vectors of a collection with a sparse field, as in the Qdrant store
SPARSE_NAME = "sparse"
MULTIVECTOR_NAME = "colbert"


def _unavailable(exc: BaseException) -> bool:
    # Another process has the shard open (its WAL is locked).
    return "WouldBlock" in str(exc) or "Resource temporarily unavailable" in str(exc)


class QdrantEdgeStore:
    """One edge shard under ``path``, named after the collection."""

    name = "qdrant-edge"

    def __init__(self, collection: str, *, path: str | None = None, retry: RetryPolicy | None = None) -> None:
        self.collection = check_collection_name(collection)
        self.retry = retry or RetryPolicy()
        self.root = Path(path or DEFAULT_PATH) / collection
        self.location = str(self.root.parent)
        self._spec: CollectionSpec | None = None
        self._shard: Any = None
        if (self.root / _SPEC_FILE).exists():
            self._open_shard(create=None)

    def _call(self, fn: Callable[[], T], what: str) -> T:
        return self.retry.call_client(
            fn, what, f"qdrant-edge at {self.location}", lambda exc: str(exc) if _unavailable(exc) else None
        )

    def _open_shard(self, create: CollectionSpec | None) -> None:
        import qdrant_edge as qe

        shard_dir = self.root / "shard"
        if create is None:
            self._shard = self._call(lambda: qe.EdgeShard.load(str(shard_dir)), "load shard")
            return
        quant = None
        if create.quantization == "int8":
            quant = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99)
        elif create.quantization == "binary":
            quant = qe.BinaryQuantizationConfig()
        multivector = (
            qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim) if create.layout == "multivector" else None
        )
        params = qe.EdgeVectorParams(
            size=create.dimension, distance=qe.Distance.Cosine, multivector_config=multivector
        )
        if not create.named_fields:
            config = qe.EdgeConfig(vectors=params, quantization_config=quant)
        else:
            vectors = {DENSE_NAME: params}
            if create.multivector_dimension is not None:
                vectors[MULTIVECTOR_NAME] = qe.EdgeVectorParams(
                    size=create.multivector_dimension,
                    distance=qe.Distance.Cosine,
                    multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
                )
            sparse = None
            if create.sparse is not None:
                modifier = qe.Modifier.Idf if create.sparse == "bm25" else None
                sparse = {SPARSE_NAME: qe.EdgeSparseVectorParams(modifier=modifier)}
            config = qe.EdgeConfig(vectors=vectors, sparse_vectors=sparse, quantization_config=quant)
        self._shard = self._call(lambda: qe.EdgeShard.create(str(shard_dir), config), "create shard")

    # -- collection ---------------------------------------------------------------------------------
    def read_spec(self) -> CollectionSpec | None:
        if self._spec is not None:
            return self._spec
        spec_file = self.root / _SPEC_FILE
        if not spec_file.exists():
            if (self.root / "shard").exists():
                raise CollectionMismatchError(
                    f"shard {self.root} was not created by poolrag (no {_SPEC_FILE}); "
                    "choose another --collection"
                )
            return None
        self._spec = CollectionSpec.from_metadata(self.collection, spec_file.read_text())
        return self._spec

    def ensure_collection(self, spec: CollectionSpec) -> CollectionSpec:
        self._spec = ensure_against(self, spec, self._create)
        return self._spec

    def update_spec(self, spec: CollectionSpec) -> None:
        """``poolrag.json`` replaced atomically: a crash leaves the old file or the new one."""
        check_update(self, spec)
        tmp = self.root / f".{_SPEC_FILE}.tmp"
        tmp.write_text(spec.to_metadata())
        os.replace(tmp, self.root / _SPEC_FILE)
        self._spec = spec

    def _create(self, spec: CollectionSpec) -> None:
        check_writable_folder(self.root, "the Qdrant Edge shard", create=True)
        tmp = self.root / f".{_SPEC_FILE}.tmp"
        tmp.write_text(spec.to_metadata())
        self._open_shard(create=spec)
        os.replace(tmp, self.root / _SPEC_FILE)
        logger.info("created qdrant-edge shard %s (%s, %d dims)", self.root, spec.layout, spec.dimension)

    # -- writes -------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        import qdrant_edge as qe

        if not records:
            return
        spec = self.read_spec()
        points = []
        for r in records:
            vector: Any = np.asarray(r.vector, dtype=np.float32).tolist()
            if spec is not None:
                check_record_fields(spec, r)
                if spec.named_fields:
                    vector = {DENSE_NAME: vector}
                if r.sparse is not None:
                    vector[SPARSE_NAME] = _edge_sparse(r.sparse)
                if r.multivector is not None:
                    vector[MULTIVECTOR_NAME] = np.asarray(r.multivector, dtype=np.float32).tolist()
            points.append(qe.Point(r.id, vector, dict(r.payload)))
        self._call(lambda: self._shard.update(qe.UpdateOperation.upsert_points(points)), "upsert")
        self._call(self._shard.flush, "flush")

    def delete(self, ids: Sequence[str]) -> None:
        import qdrant_edge as qe

        ids = list(ids)
        if ids:
            self._call(lambda: self._shard.update(qe.UpdateOperation.delete_points(ids)), "delete")
            self._call(self._shard.flush, "flush")

    # -- reads --------------------------------------------------------------------------------------
    def list_sources(self) -> dict[str, str]:
        import qdrant_edge as qe

        out: dict[str, str] = {}
        offset = None
        while True:
            request = qe.ScrollRequest(offset=offset, limit=_PAGE, with_payload=["source"], with_vector=False)
            records, offset = self._call(lambda r=request: self._shard.scroll(r), "scroll")
            out.update({str(r.id): (r.payload or {}).get("source", "") for r in records})
            if offset is None or not records:
                return out

    def count(self) -> int:
        import qdrant_edge as qe

        return int(self._call(lambda: self._shard.count(qe.CountRequest(exact=True)), "count"))

    def _dense_params(self) -> Any:
        import qdrant_edge as qe

        spec = self.read_spec()
        if spec is not None and spec.quantization:
            return qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True, oversampling=2.0))
        return None

    def _dense_query(self, vector: Any) -> Any:
        import qdrant_edge as qe

        spec = self.read_spec()
        using = DENSE_NAME if spec is not None and spec.named_fields else None
        return qe.Query.Nearest(vector, using=using)

    def _run(
        self,
        query: Any,
        limit: int,
        filter: MetadataFilter | None,
        *,
        params: Any = None,
        prefetches: Any = None,
    ) -> list[StoreHit]:
        import qdrant_edge as qe

        request = qe.QueryRequest(
            limit=limit,
            query=query,
            prefetches=prefetches,
            with_payload=True,
            filter=_edge_filter(check_filter(filter)),
            params=params,
        )
        points = self._call(lambda: self._shard.query(request), "query")
        return [StoreHit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]

    def search(self, vector: np.ndarray, limit: int, filter: MetadataFilter | None = None) -> list[StoreHit]:
        query = self._dense_query(np.asarray(vector, dtype=np.float32).tolist())
        return self._run(query, limit, filter, params=self._dense_params())

    def search_multivector(
        self, vectors: np.ndarray, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        import qdrant_edge as qe

        tokens = np.asarray(vectors, dtype=np.float32).tolist()
        spec = self.read_spec()
        if spec is not None and spec.multivector_dimension is not None:  # the field next to the dense one
            return self._run(qe.Query.Nearest(tokens, using=MULTIVECTOR_NAME), limit, filter)
        return self._run(self._dense_query(tokens), limit, filter, params=self._dense_params())

    def _sparse_spec(self) -> CollectionSpec:
        spec = self.read_spec()
        if spec is None:
            raise CollectionNotFoundError(f"shard {self.root} does not exist")
        return require_sparse(spec, f"qdrant-edge at {self.location}")

    def search_sparse(
        self, sparse: SparseVector, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Inner product with the stored sparse vectors; the shard multiplies by IDF for ``bm25``."""
        import qdrant_edge as qe

        spec = self._sparse_spec()
        query = check_query_sparse(sparse)
        check_limit(limit)
        if not len(query):
            return []
        nearest = qe.Query.Nearest(_edge_sparse(query), using=SPARSE_NAME)
        return self._run(nearest, limit, filter, params=_sparse_params(spec))

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
        """Plain RRF and DBSF in the shard (two prefetches, the filter in each); min-max and weighted
        RRF from the two legs."""
        import qdrant_edge as qe

        spec = self._sparse_spec()
        fusion = check_fusion(collection_default_fusion(spec) if fusion is None else fusion)
        depth = prefetch_depth(limit, prefetch)
        query = check_query_sparse(sparse)
        if fusion not in ("rrf", "dbsf") or not len(query):
            return local_fusion(self, dense, query if len(query) else None, limit, depth, filter, fusion)
        query_filter = _edge_filter(check_filter(filter))
        legs = [
            qe.Prefetch(
                depth,
                query=self._dense_query(np.asarray(dense, dtype=np.float32).tolist()),
                filter=query_filter,
                params=self._dense_params(),
            ),
            qe.Prefetch(
                depth,
                query=qe.Query.Nearest(_edge_sparse(query), using=SPARSE_NAME),
                filter=query_filter,
                params=_sparse_params(spec),
            ),
        ]
        if fusion == "dbsf":
            return self._run(qe.Fusion.Dbsf(), limit, filter, prefetches=legs)
        # Like Qdrant, the shard scores rank r (from 1) as 1 / (r - 1 + k): k = 61 is the textbook 60.
        return self._run(qe.Fusion.Rrf(k=RRF_K + 1), limit, filter, prefetches=legs)

    def fetch_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        records = self._call(
            lambda: self._shard.retrieve(list(ids), with_payload=False, with_vector=True), "retrieve"
        )
        out = {}
        for r in records:
            vec = r.vector.get(DENSE_NAME, r.vector.get("")) if isinstance(r.vector, dict) else r.vector
            out[str(r.id)] = np.asarray(vec, dtype=np.float32)
        return out

    def fetch_sparse(self, ids: Sequence[str]) -> dict[str, SparseVector]:
        self._sparse_spec()
        records = self._call(
            lambda: self._shard.retrieve(list(ids), with_payload=False, with_vector=True), "retrieve"
        )
        out = {}
        for r in records:
            stored = r.vector.get(SPARSE_NAME) if isinstance(r.vector, dict) else None
            weights = dict(zip(stored.indices, stored.values, strict=True)) if stored is not None else {}
            out[str(r.id)] = SparseVector.from_dict(weights)
        return out

    def close(self) -> None:
        if self._shard is not None:
            try:
                self._shard.flush()
                self._shard.close()
            except Exception:
                logger.debug("closing qdrant-edge shard failed", exc_info=True)
            self._shard = None


def _sparse_params(spec: CollectionSpec) -> Any:
    """IDF over the live points for ``bm25`` (see the module docstring); nothing for learned weights."""
    import qdrant_edge as qe

    return qe.SearchParams(idf=qe.IdfParams(corpus=qe.Filter())) if spec.sparse == "bm25" else None


def _edge_sparse(vector: SparseVector) -> Any:
    import qdrant_edge as qe

    return qe.SparseVector(vector.indices.tolist(), vector.values.tolist())


def _edge_filter(checked: CheckedFilter | None) -> Any:
    """A checked metadata filter in qdrant-edge's classes (the same shape as the Qdrant store's)."""
    import qdrant_edge as qe

    if not checked:
        return None

    def condition(key: str, value: object) -> Any:
        if isinstance(value, bool):
            # qdrant-edge-py turns a Python bool into the integer 0/1, which never matches a boolean.
            raise InvalidInputError(
                f"qdrant-edge cannot filter on boolean values ({key!r}: {value!r}); use the qdrant "
                "or milvus store, or store the flag as a string"
            )
        if isinstance(value, float):  # exact matches take strings and integers only
            return qe.FieldCondition(key, range=qe.RangeFloat(gte=value, lte=value))
        return qe.FieldCondition(key, match=qe.MatchValue(value))

    must: list[Any] = []
    for key, values in checked.items():
        conditions = [condition(key, v) for v in values]
        must.append(conditions[0] if len(conditions) == 1 else qe.Filter(should=conditions))
    return qe.Filter(must=must)
