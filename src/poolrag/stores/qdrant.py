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

import atexit
import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from poolrag.lock_holders import held_by
from poolrag.sparse.vector import SparseVector
from poolrag.stores import qdrant_points
from poolrag.stores.base import METADATA_KEY, ChunkRecord, CollectionSpec, StoreHit
from poolrag.stores.errors import StoreRequestError
from poolrag.stores.filters import CheckedFilter
from poolrag.stores.local_paths import check_writable_folder
from poolrag.stores.qdrant_local_points import check_local_points
from poolrag.stores.qdrant_points import Leg, QdrantPointStore
from poolrag.stores.registry import StoreLocation
from poolrag.stores.retry import RetryPolicy
from poolrag.stores.storage_faults import StoreWriteError, storage_fault
from poolrag.stores.template import HybridQuery

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PATH = "./poolrag_qdrant"
#: qdrant-client's words for a local-mode folder another process holds, and the file it locks there
_LOCAL_HELD = "already accessed by another instance"
_LOCAL_LOCK_FILE = ".lock"


def _unavailable_message(exc: Exception, folder: str | None = None) -> str | None:
    """One line for an outage (a gateway's HTML page or a client's multi-line text included); for
    local mode's ``folder`` held by another process, which process where it can be found."""
    if not _unavailable(exc):
        return None
    message = (_refusal(exc) or " ".join(str(exc).split())) or type(exc).__name__
    holder = held_by(Path(folder) / _LOCAL_LOCK_FILE) if folder is not None and _LOCAL_HELD in message else ""
    return f"{message} ({holder})" if holder else message


def _unavailable(exc: BaseException) -> bool:
    """Connection refused, timeouts, or a local-mode folder held by another process."""
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, ResponseHandlingException):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (502, 503, 504)
    if isinstance(exc, RuntimeError) and _LOCAL_HELD in str(exc):
        return True
    import grpc  # a dependency of qdrant-client
    import httpx

    if isinstance(exc, grpc.RpcError):
        return exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return isinstance(exc, (httpx.TransportError, ConnectionError, TimeoutError))


def _refusal(exc: BaseException) -> str | None:
    """What an HTTP answer that is not a database outage says, with the likely cause."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if not isinstance(exc, UnexpectedResponse):
        return None
    answer = f"HTTP {exc.status_code} {exc.reason_phrase}".strip()
    said = _qdrant_error_text(exc.content)
    if said is not None:  # Qdrant's own JSON error: the server is Qdrant, its words say what is wrong
        return f"{answer}: {said}"
    hints = {401: "check --api-key", 403: "check --api-key", 404: "is a Qdrant server at that --url?"}
    hint = hints.get(exc.status_code or 0)
    body = " ".join(exc.content[:200].decode(errors="replace").split())
    return f"{answer} ({hint})" if hint else f"{answer}: {body}"


def _qdrant_error_text(content: bytes) -> str | None:
    """The ``status.error`` of Qdrant's JSON error body, or ``None`` for any other answer."""
    try:
        status = json.loads(content).get("status")
    except (ValueError, AttributeError):
        return None
    error = status.get("error") if isinstance(status, dict) else None
    return " ".join(str(error).split()) if error else None


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


class QdrantStore(QdrantPointStore):
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
        self._local = url is None  # local mode searches exhaustively: no payload indexes, no quantization
        if url is None:
            path = path or DEFAULT_PATH
        super().__init__(collection, str(path) if url is None else url)
        self.retry = retry or RetryPolicy()
        if url is None:
            check_writable_folder(Path(self.location), "the Qdrant local-mode folder", create=True)
        self._guard: threading.RLock | None = None
        self._client = self._call(lambda: self._connect(path, url, api_key, timeout), "connect")
        if url is None:
            self._guard = _LocalClients.guard(str(path))

    @classmethod
    def local_data(cls, collection: str, location: StoreLocation) -> Path | None:
        """The local-mode folder (every collection in one), or ``None`` for a server."""
        if location.uri is not None or location.url is not None:
            return None
        return Path(location.path or DEFAULT_PATH)

    @classmethod
    def open(cls, collection: str, address: StoreLocation) -> QdrantStore:
        address.refuse_other_than(
            ("path", "url"), "qdrant takes --path (local mode) or --url (server), not --uri"
        )
        return cls(
            collection, path=address.path, url=address.url, api_key=address.api_key, retry=address.retry
        )

    @staticmethod
    def _connect(path: str | None, url: str | None, api_key: str | None, timeout: int) -> Any:
        from qdrant_client import QdrantClient

        if url is None:
            assert path is not None
            return _LocalClients.acquire(path)
        return QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)

    def _call(self, fn: Callable[[], T], what: str) -> T:
        guard = self._guard
        if guard is not None:  # local mode: one call at a time on the folder's client
            unguarded = fn

            def fn() -> T:
                with guard:
                    return unguarded()

        try:
            folder = self.location if self._local else None
            return self.retry.call_client(fn, what, self.where, lambda exc: _unavailable_message(exc, folder))
        except Exception as exc:
            cause = storage_fault(exc) if self._local else None
            if cause is not None:
                raise StoreWriteError(
                    f"cannot write the Qdrant local folder {self.location}: {cause}"
                ) from None
            refusal = _refusal(exc)
            if refusal is None:
                raise
            raise StoreRequestError(f"{self.where} refused {what}: {refusal}") from exc

    # -- collection ---------------------------------------------------------------------------------
    def _load_spec(self) -> CollectionSpec | None:
        if not self._call(lambda: self._client.collection_exists(self.collection), "collection_exists"):
            return None
        info = self._call(lambda: self._client.get_collection(self.collection), "get_collection")
        raw = (info.config.metadata or {}).get(METADATA_KEY)
        return CollectionSpec.from_collection_metadata(self.collection, raw, self.where)

    def _write_spec(self, spec: CollectionSpec) -> None:
        """The poolrag key of the collection metadata replaced (other keys stay as they are)."""
        text = spec.to_metadata()
        self._call(
            lambda: self._client.update_collection(self.collection, metadata={METADATA_KEY: text}),
            "update_collection",
        )

    def _create(self, spec: CollectionSpec) -> None:
        from qdrant_client import models

        vectors, sparse_vectors = qdrant_points.vector_fields(
            spec,
            vector_params=models.VectorParams,
            maxsim=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            storage=qdrant_points.DenseStorage(
                models.Datatype.FLOAT16, models.Datatype.UINT8, models.Distance.COSINE, models.Distance.DOT
            ),
            sparse_params=models.SparseVectorParams,
            idf=models.Modifier.IDF,
        )
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
    def _upsert(self, spec: CollectionSpec, records: Sequence[ChunkRecord]) -> None:
        from qdrant_client import models

        points = [
            models.PointStruct(
                id=r.id, vector=qdrant_points.point_vector(spec, r, self._sparse_vector), payload=r.payload
            )
            for r in records
        ]
        self._call(lambda: self._client.upsert(self.collection, points, wait=True), "upsert")

    def _delete(self, ids: list[str]) -> None:
        from qdrant_client import models

        for start in range(0, len(ids), qdrant_points.PAGE):
            selector = models.PointIdsList(points=ids[start : start + qdrant_points.PAGE])
            self._call(lambda s=selector: self._client.delete(self.collection, s, wait=True), "delete")

    # -- reads --------------------------------------------------------------------------------------
    def _scroll(self, offset: Any, whole: bool) -> tuple[list[Any], Any]:
        from qdrant_client import models

        payload = models.PayloadSelectorExclude(exclude=["text"]) if whole else ["source"]
        return self._call(
            lambda: self._client.scroll(
                self.collection,
                limit=qdrant_points.PAGE,
                offset=offset,
                with_payload=payload,
                with_vectors=False,
            ),
            "scroll",
        )

    def count(self) -> int:
        return int(self._call(lambda: self._client.count(self.collection, exact=True).count, "count"))

    def _dense_params(self, spec: CollectionSpec) -> Any:
        from qdrant_client import models

        if spec.quantization and not self._local:
            return models.SearchParams(
                quantization=models.QuantizationSearchParams(
                    rescore=True, oversampling=qdrant_points.oversampling(spec)
                )
            )
        return None

    def _sparse_vector(self, vector: SparseVector) -> Any:
        from qdrant_client import models

        return models.SparseVector(indices=vector.indices.tolist(), values=vector.values.tolist())

    def _points(self, limit: int, filter: CheckedFilter | None, **request: Any) -> list[StoreHit]:
        query_filter = qdrant_filter(filter)
        res = self._call(
            lambda: self._client.query_points(
                self.collection, limit=limit, query_filter=query_filter, with_payload=True, **request
            ),
            "query_points",
        )
        return qdrant_points.hits(res.points)

    def _query(self, leg: Leg, limit: int, filter: CheckedFilter | None) -> list[StoreHit]:
        return self._points(limit, filter, query=leg.query, using=leg.using, search_params=leg.params)

    def _query_fused(self, legs: list[Leg], query: HybridQuery) -> list[StoreHit]:
        from qdrant_client import models

        query_filter = qdrant_filter(query.filter)
        prefetch = [
            models.Prefetch(
                query=leg.query, using=leg.using, limit=query.depth, filter=query_filter, params=leg.params
            )
            for leg in legs
        ]
        fused = qdrant_points.native_fusion(
            query.fusion,
            lambda: models.FusionQuery(fusion=models.Fusion.DBSF),
            lambda k: models.RrfQuery(rrf=models.Rrf(k=k)),
        )
        return self._points(query.limit, query.filter, query=fused, prefetch=prefetch)

    def _retrieve(self, ids: list[str], vectors: Any) -> list[Any]:
        points: list[Any] = []
        for start in range(0, len(ids), qdrant_points.PAGE):
            part = ids[start : start + qdrant_points.PAGE]
            points += self._call(
                lambda p=part: self._client.retrieve(
                    self.collection, p, with_payload=False, with_vectors=vectors
                ),
                "retrieve",
            )
        return points

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


def qdrant_filter(checked: CheckedFilter | None) -> Any:
    """A checked metadata filter as a qdrant-client ``Filter`` on top-level payload keys."""
    from qdrant_client import models

    def condition(key: str, value: object) -> Any:
        # Qdrant matches strings, integers and booleans exactly; a float matches as a one-point range.
        if isinstance(value, float):
            return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    return qdrant_points.payload_filter(checked, condition, models.Filter)


class _LocalClients:
    """One local-mode client per folder per process: local mode locks its folder, so two
    collections in the same folder (or two stores on one collection) must share a client.

    The client is not thread-safe (its SQLite connection and in-memory points are shared), and
    the async adapters write from worker threads: concurrent ``aadd_documents`` raised "cannot
    start a transaction within a transaction" and lost points on disk. Each folder's client
    comes with a lock every call on it takes (:meth:`guard`)."""

    _lock = threading.Lock()
    _open: ClassVar[dict[str, list[Any]]] = {}  # resolved path -> [client, users, guard]

    @classmethod
    def acquire(cls, path: str) -> Any:
        from qdrant_client import QdrantClient

        key = str(Path(path).resolve())
        with cls._lock:
            if not cls._open:
                atexit.register(cls.close_all)  # once per run of opens (close_all unregisters)
            if key not in cls._open:
                check_local_points(path)  # qdrant-client unpickles every row as it opens the folder
                cls._open[key] = [QdrantClient(path=path), 0, threading.RLock()]
            cls._open[key][1] += 1
            return cls._open[key][0]

    @classmethod
    def guard(cls, path: str) -> threading.RLock:
        """The lock of the client :meth:`acquire` gave for ``path`` (call while holding it)."""
        with cls._lock:
            return cls._open[str(Path(path).resolve())][2]

    @classmethod
    def close_all(cls) -> None:
        """Close the clients still open when the interpreter exits: a store left open (a script
        that never calls ``close``) otherwise closed in QdrantClient.__del__ during shutdown, and
        printed an ImportError traceback ('sys.meta_path is None')."""
        with cls._lock:
            entries, cls._open = list(cls._open.values()), {}
            atexit.unregister(cls.close_all)
        for client, *_ in entries:
            try:
                client.close()
            except Exception:
                logger.debug("closing a qdrant local client at exit failed", exc_info=True)

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
                with entry[2]:  # after a call another thread of this store is making
                    entry[0].close()
                if not cls._open:
                    atexit.unregister(cls.close_all)
