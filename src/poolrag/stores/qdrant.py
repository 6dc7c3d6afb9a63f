"""Qdrant store (qdrant-client): local mode in a folder by default, any Qdrant server by URL.

One unnamed vector per point: a ``[D]`` vector (dense) or a ``[T, D]`` multivector compared with
MaxSim (ColBERT), which Qdrant scores natively. A collection with a sparse field instead holds two
named vectors, ``dense`` and ``sparse`` (the latter with ``Modifier.IDF`` for BM25), and hybrid
search fuses both legs by the shared rules of :mod:`poolrag.stores.hybrid` (RRF and DBSF as
prefetches fused in Qdrant, the others from the two legs); collections without one keep the unnamed
layout, so those written before sparse support read as they always did. ``int8`` / ``binary``
quantization keep the original vectors on disk and a compressed copy in RAM; searches oversample
on the compressed copy and rescore with the originals. Collection metadata holds poolrag's model description.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import (
    METADATA_KEY,
    ChunkRecord,
    CollectionSpec,
    HybridFusion,
    StoreHit,
    check_update,
    ensure_against,
)
from poolrag.stores.errors import CollectionMismatchError
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
from poolrag.stores.storage_faults import StoreWriteError, storage_fault

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PATH = "./poolrag_qdrant"
_PAGE = 1000
DENSE_NAME = "dense"  # the named vectors of a collection with a sparse or token-vector field
SPARSE_NAME = "sparse"
MULTIVECTOR_NAME = "colbert"


def _unavailable_message(exc: Exception) -> str | None:
    return (str(exc) or type(exc).__name__) if _unavailable(exc) else None


def _unavailable(exc: BaseException) -> bool:
    """Connection refused, timeouts, or a local-mode folder held by another process."""
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, ResponseHandlingException):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (502, 503, 504)
    if isinstance(exc, RuntimeError) and "already accessed by another instance" in str(exc):
        return True
    try:
        import grpc

        if isinstance(exc, grpc.RpcError):
            return exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    except ImportError:  # pragma: no cover - grpc ships with qdrant-client
        pass
    import httpx

    return isinstance(exc, (httpx.TransportError, ConnectionError, TimeoutError))


def _quantization(kind: str | None) -> Any:
    from qdrant_client import models

    if kind == "int8":
        return models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(
                type=models.ScalarType.INT8, quantile=0.99, always_ram=True
            )
        )
    if kind == "binary":
        return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
    return None


class QdrantStore:
    """One Qdrant collection: ``path`` for local mode, or ``url`` (+ ``api_key``) for a server."""

    name = "qdrant"

    def __init__(
        self,
        collection: str,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: int = 10,
    ) -> None:
        if path is not None and url is not None:
            raise ValueError("give either a local path or a server url, not both")
        self.collection = check_collection_name(collection)
        self.retry = retry or RetryPolicy()
        self._spec: CollectionSpec | None = None
        self._local = url is None  # local mode searches exhaustively: no payload indexes, no quantization
        if url is None:
            path = path or DEFAULT_PATH
            check_writable_folder(Path(path), "the Qdrant local-mode folder", create=True)
            self.location = str(path)
        else:
            self.location = url
        self._client = self._call(lambda: self._connect(path, url, api_key, timeout), "connect")

    @staticmethod
    def _connect(path: str | None, url: str | None, api_key: str | None, timeout: int) -> Any:
        from qdrant_client import QdrantClient

        if url is None:
            assert path is not None
            return _LocalClients.acquire(path)
        return QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)

    def _call(self, fn: Callable[[], T], what: str) -> T:
        try:
            return self.retry.call_client(fn, what, f"qdrant at {self.location}", _unavailable_message)
        except Exception as exc:
            cause = storage_fault(exc) if self._local else None
            if cause is None:
                raise
            raise StoreWriteError(f"cannot write the Qdrant local folder {self.location}: {cause}") from None

    # -- collection ---------------------------------------------------------------------------------
    def read_spec(self) -> CollectionSpec | None:
        if self._spec is not None:
            return self._spec
        if not self._call(lambda: self._client.collection_exists(self.collection), "collection_exists"):
            return None
        info = self._call(lambda: self._client.get_collection(self.collection), "get_collection")
        raw = (info.config.metadata or {}).get(METADATA_KEY)
        if raw is None:
            raise CollectionMismatchError(
                f"collection {self.collection!r} in qdrant at {self.location} was not created by poolrag "
                "(no model metadata); choose another --collection"
            )
        self._spec = CollectionSpec.from_metadata(self.collection, raw)
        return self._spec

    def ensure_collection(self, spec: CollectionSpec) -> CollectionSpec:
        self._spec = ensure_against(self, spec, self._create)
        return self._spec

    def update_spec(self, spec: CollectionSpec) -> None:
        """The poolrag key of the collection metadata replaced (other keys stay as they are)."""
        check_update(self, spec)
        text = spec.to_metadata()
        self._call(
            lambda: self._client.update_collection(self.collection, metadata={METADATA_KEY: text}),
            "update_collection",
        )
        self._spec = spec

    def _create(self, spec: CollectionSpec) -> None:
        from qdrant_client import models

        multivector = (
            models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
            if spec.layout == "multivector"
            else None
        )
        vectors: Any = models.VectorParams(
            size=spec.dimension, distance=models.Distance.COSINE, multivector_config=multivector
        )
        sparse_vectors = None
        if spec.named_fields:
            vectors = {DENSE_NAME: vectors}
        if spec.multivector_dimension is not None:
            vectors[MULTIVECTOR_NAME] = models.VectorParams(
                size=spec.multivector_dimension,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            )
        if spec.sparse is not None:
            modifier = models.Modifier.IDF if spec.sparse == "bm25" else None
            sparse_vectors = {SPARSE_NAME: models.SparseVectorParams(modifier=modifier)}
        self._call(
            lambda: self._client.create_collection(
                self.collection,
                vectors_config=vectors,
                sparse_vectors_config=sparse_vectors,
                quantization_config=_quantization(spec.quantization),
                metadata={METADATA_KEY: spec.to_metadata()},
            ),
            "create_collection",
        )
        logger.info("created qdrant collection %r (%s, %d dims)", spec.name, spec.layout, spec.dimension)
        if self._local:
            return
        self._call(
            lambda: self._client.create_payload_index(
                self.collection, "source", models.PayloadSchemaType.KEYWORD
            ),
            "create_payload_index",
        )

    # -- writes -------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        from qdrant_client import models

        if not records:
            return
        spec = self.read_spec()
        points = []
        for r in records:
            dense = np.asarray(r.vector, dtype=np.float32).tolist()
            vector: Any = dense
            if spec is not None:
                check_record_fields(spec, r)
                if spec.named_fields:
                    vector = {DENSE_NAME: dense}
                if r.sparse is not None:
                    vector[SPARSE_NAME] = _qdrant_sparse(r.sparse)
                if r.multivector is not None:
                    vector[MULTIVECTOR_NAME] = np.asarray(r.multivector, dtype=np.float32).tolist()
            points.append(models.PointStruct(id=r.id, vector=vector, payload=r.payload))
        self._call(lambda: self._client.upsert(self.collection, points, wait=True), "upsert")

    def delete(self, ids: Sequence[str]) -> None:
        from qdrant_client import models

        ids = list(ids)
        for start in range(0, len(ids), _PAGE):
            selector = models.PointIdsList(points=ids[start : start + _PAGE])
            self._call(lambda s=selector: self._client.delete(self.collection, s, wait=True), "delete")

    # -- reads --------------------------------------------------------------------------------------
    def list_sources(self) -> dict[str, str]:
        out: dict[str, str] = {}
        offset = None
        while True:
            points, offset = self._call(
                lambda o=offset: self._client.scroll(
                    self.collection, limit=_PAGE, offset=o, with_payload=["source"], with_vectors=False
                ),
                "scroll",
            )
            out.update({str(p.id): (p.payload or {}).get("source", "") for p in points})
            if offset is None:
                return out

    def count(self) -> int:
        return int(self._call(lambda: self._client.count(self.collection, exact=True).count, "count"))

    def _dense_params(self) -> Any:
        from qdrant_client import models

        spec = self.read_spec()
        if spec is not None and spec.quantization and not self._local:
            return models.SearchParams(
                quantization=models.QuantizationSearchParams(rescore=True, oversampling=2.0)
            )
        return None

    def _dense_using(self) -> str | None:
        spec = self.read_spec()
        return DENSE_NAME if spec is not None and spec.named_fields else None

    def _query(
        self,
        query: Any,
        limit: int,
        filter: MetadataFilter | None,
        *,
        using: str | None = None,
        params: Any = None,
        prefetch: Any = None,
    ) -> list[StoreHit]:
        query_filter = qdrant_filter(check_filter(filter))
        res = self._call(
            lambda: self._client.query_points(
                self.collection,
                query=query,
                using=using,
                prefetch=prefetch,
                limit=limit,
                query_filter=query_filter,
                with_payload=True,
                search_params=params,
            ),
            "query_points",
        )
        return [StoreHit(str(p.id), float(p.score), dict(p.payload or {})) for p in res.points]

    def search(self, vector: np.ndarray, limit: int, filter: MetadataFilter | None = None) -> list[StoreHit]:
        return self._query(
            np.asarray(vector, dtype=np.float32).tolist(),
            limit,
            filter,
            using=self._dense_using(),
            params=self._dense_params(),
        )

    def _sparse_spec(self) -> CollectionSpec:
        spec = self.read_spec()
        if spec is None:
            from poolrag.stores.errors import CollectionNotFoundError

            raise CollectionNotFoundError(f"collection {self.collection!r} does not exist in qdrant")
        return require_sparse(spec, f"qdrant at {self.location}")

    def search_sparse(
        self, sparse: SparseVector, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Inner product with the stored sparse vectors; Qdrant multiplies by IDF in ``bm25`` collections.

        Local mode measures IDF over the live points. A Qdrant server reads it from its sparse index,
        which goes on counting deleted (and overwritten) points until the optimiser vacuums them.
        """
        self._sparse_spec()
        query = check_query_sparse(sparse)
        check_limit(limit)
        if not len(query):
            return []
        return self._query(_qdrant_sparse(query), limit, filter, using=SPARSE_NAME)

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
        """Plain RRF and DBSF run in Qdrant (two prefetches, the filter in each); min-max and weighted
        RRF are computed from the two legs (Qdrant's weighted RRF divides ranks by the weight)."""
        from qdrant_client import models

        spec = self._sparse_spec()
        fusion = check_fusion(collection_default_fusion(spec) if fusion is None else fusion)
        depth = prefetch_depth(limit, prefetch)
        query = check_query_sparse(sparse)
        if fusion not in ("rrf", "dbsf") or not len(query):
            return local_fusion(self, dense, query if len(query) else None, limit, depth, filter, fusion)
        query_filter = qdrant_filter(check_filter(filter))
        legs = [
            models.Prefetch(
                query=np.asarray(dense, dtype=np.float32).tolist(),
                using=DENSE_NAME,
                limit=depth,
                filter=query_filter,
                params=self._dense_params(),
            ),
            models.Prefetch(query=_qdrant_sparse(query), using=SPARSE_NAME, limit=depth, filter=query_filter),
        ]
        if fusion == "dbsf":
            fused: Any = models.FusionQuery(fusion=models.Fusion.DBSF)
        else:  # Qdrant scores rank r (from 1) as 1 / (r - 1 + k): its k = 61 is the textbook k = 60.
            fused = models.RrfQuery(rrf=models.Rrf(k=RRF_K + 1))
        return self._query(fused, limit, filter, prefetch=legs)

    def search_multivector(
        self, vectors: np.ndarray, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Qdrant applies the filter inside the MaxSim search, so ``limit`` matching chunks come back."""
        spec = self.read_spec()
        if spec is not None and spec.multivector_dimension is not None:  # the field next to the dense one
            return self._query(
                np.asarray(vectors, dtype=np.float32).tolist(), limit, filter, using=MULTIVECTOR_NAME
            )
        return self._query(
            np.asarray(vectors, dtype=np.float32).tolist(), limit, filter, params=self._dense_params()
        )

    def fetch_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        ids = list(ids)
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), _PAGE):
            part = ids[start : start + _PAGE]
            points = self._call(
                lambda p=part: self._client.retrieve(
                    self.collection, p, with_payload=False, with_vectors=True
                ),
                "retrieve",
            )
            for p in points:
                vector = p.vector[DENSE_NAME] if isinstance(p.vector, dict) else p.vector
                out[str(p.id)] = np.asarray(vector, dtype=np.float32)
        return out

    def fetch_sparse(self, ids: Sequence[str]) -> dict[str, SparseVector]:
        self._sparse_spec()
        ids = list(ids)
        out: dict[str, SparseVector] = {}
        for start in range(0, len(ids), _PAGE):
            part = ids[start : start + _PAGE]
            points = self._call(
                lambda p=part: self._client.retrieve(
                    self.collection, p, with_payload=False, with_vectors=[SPARSE_NAME]
                ),
                "retrieve",
            )
            for p in points:
                stored = (p.vector or {}).get(SPARSE_NAME) if isinstance(p.vector, dict) else None
                out[str(p.id)] = _from_qdrant_sparse(stored)
        return out

    def close(self) -> None:
        if self._client is None:
            return
        try:
            if self._local:
                _LocalClients.release(self.location)
            else:
                self._client.close()
        except Exception:
            logger.debug("closing qdrant client failed", exc_info=True)
        self._client = None


def _qdrant_sparse(vector: SparseVector) -> Any:
    from qdrant_client import models

    return models.SparseVector(indices=vector.indices.tolist(), values=vector.values.tolist())


def _from_qdrant_sparse(stored: Any) -> SparseVector:
    if stored is None:
        return SparseVector.empty()
    return SparseVector.from_dict(dict(zip(stored.indices, stored.values, strict=True)))


def qdrant_filter(checked: CheckedFilter | None) -> Any:
    """A checked metadata filter as a qdrant-client ``Filter`` on top-level payload keys."""
    from qdrant_client import models

    if not checked:
        return None

    def condition(key: str, value: object) -> Any:
        # Qdrant matches strings, integers and booleans exactly; a float matches as a one-point range.
        if isinstance(value, float):
            return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    must: list[Any] = []
    for key, values in checked.items():
        conditions = [condition(key, v) for v in values]
        must.append(conditions[0] if len(conditions) == 1 else models.Filter(should=conditions))
    return models.Filter(must=must)


class _LocalClients:
    """One local-mode client per folder per process: local mode locks its folder, so two
    collections in the same folder (or two stores on one collection) must share a client."""

    _lock = threading.Lock()
    _open: ClassVar[dict[str, list[Any]]] = {}  # resolved path -> [client, users]

    @classmethod
    def acquire(cls, path: str) -> Any:
        from qdrant_client import QdrantClient

        key = str(Path(path).resolve())
        with cls._lock:
            if key not in cls._open:
                cls._open[key] = [QdrantClient(path=path), 0]
            cls._open[key][1] += 1
            return cls._open[key][0]

    @classmethod
    def release(cls, path: str) -> None:
        key = str(Path(path).resolve())
        with cls._lock:
            entry = cls._open.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del cls._open[key]
                entry[0].close()
