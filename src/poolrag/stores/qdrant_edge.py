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

The shard writes through memory maps, where a full disk is a SIGBUS rather than an error: the room
is checked before it loads and before each write (:mod:`poolrag.stores.edge_disk_space`), and the
folders it writes are probed before it loads, so disk and permission faults are one line as the
other local stores' are.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from poolrag.errors import InvalidInputError
from poolrag.sparse.vector import SparseVector
from poolrag.stores import qdrant_points
from poolrag.stores.base import ChunkRecord, CollectionSpec, StoreHit
from poolrag.stores.edge_disk_space import (
    HEADROOM_BYTES,
    WRITE_FACTOR,
    batch_bytes,
    require_room,
    shard_bytes,
    unbacked_bytes,
)
from poolrag.stores.errors import CollectionMismatchError
from poolrag.stores.filters import CheckedFilter
from poolrag.stores.folder_lock import FolderInUseError, FolderLock
from poolrag.stores.local_paths import check_writable_folder
from poolrag.stores.qdrant_points import Leg, QdrantPointStore
from poolrag.stores.registry import StoreLocation
from poolrag.stores.retry import RetryPolicy
from poolrag.stores.storage_faults import StoreWriteError, storage_fault
from poolrag.stores.template import HybridQuery

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PATH = "./poolrag_edge"
_SPEC_FILE = "poolrag.json"
_WHAT = "the Qdrant Edge shard"


def _collection_folder(collection: str, path: str | None) -> Path:
    return Path(path or DEFAULT_PATH) / collection


def _unavailable(exc: BaseException) -> bool:
    # Another process has the shard open (poolrag's folder lock, or the shard's WAL lock).
    return (
        isinstance(exc, FolderInUseError)
        or "WouldBlock" in str(exc)
        or "Resource temporarily unavailable" in str(exc)
    )


class QdrantEdgeStore(QdrantPointStore):
    """One edge shard under ``path``, named after the collection."""

    name = "qdrant-edge"

    def __init__(self, collection: str, *, path: str | None = None, retry: RetryPolicy | None = None) -> None:
        root = _collection_folder(collection, path)
        super().__init__(collection, str(root.parent))
        self.retry = retry or RetryPolicy()
        self.root = root
        self._shard: Any = None
        self._lock: FolderLock | None = None
        self._written = False  # since the last optimize()
        if (self.root / _SPEC_FILE).exists():
            self._open_shard(create=None)

    @classmethod
    def local_data(cls, collection: str, location: StoreLocation) -> Path | None:
        """The collection's own folder (its shard and ``poolrag.json``)."""
        if location.uri is not None or location.url is not None:
            return None
        return _collection_folder(collection, location.path)

    @classmethod
    def open(cls, collection: str, address: StoreLocation) -> QdrantEdgeStore:
        address.refuse_other_than(("path",), "qdrant-edge runs in-process: give --path, not --uri/--url")
        return cls(collection, path=address.path, retry=address.retry)

    def _call(self, fn: Callable[[], T], what: str) -> T:
        try:
            return self.retry.call_client(
                fn, what, self.where, lambda exc: str(exc) if _unavailable(exc) else None
            )
        except StoreWriteError:
            raise
        except Exception as exc:  # a disk or permission fault of the shard's files: one line
            cause = storage_fault(exc)
            if cause is None:
                raise
            raise StoreWriteError(f"cannot write {_WHAT} {self.root}: {cause}") from None

    def _hold_folder(self, *, create: bool = False) -> None:
        if self._lock is None:  # before any shard file is read (poolrag.stores.folder_lock)
            check_writable_folder(self.root, _WHAT, create=create)  # the lock and poolrag.json live there
            self._lock = self._call(FolderLock(self.root).acquire, "lock the shard's folder")

    def _open_shard(self, create: CollectionSpec | None) -> None:
        self._hold_folder()
        try:
            self._load_or_create_shard(create)
        except BaseException:  # no shard open: the folder is free for the next opener, this one too
            self._lock.release()
            self._lock = None
            raise

    def _load_or_create_shard(self, create: CollectionSpec | None) -> None:
        import qdrant_edge as qe

        shard_dir = self.root / "shard"
        if create is None:
            segments = [p for p in shard_dir.glob("segments/*") if p.is_dir()]
            for folder in (shard_dir, shard_dir / "wal", *segments):
                check_writable_folder(folder, _WHAT)  # loading writes in each (Read-only: one line)
            require_room(self.root, unbacked_bytes(shard_dir) + HEADROOM_BYTES, "loading the shard")
            self._shard = self._call(lambda: qe.EdgeShard.load(str(shard_dir)), "load shard")
            return
        require_room(self.root, HEADROOM_BYTES, "creating the shard")
        quant = None
        if create.quantization == "int8":
            quant = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99)
        elif create.quantization == "binary":
            quant = qe.BinaryQuantizationConfig()
        vectors, sparse = qdrant_points.vector_fields(
            create,
            vector_params=qe.EdgeVectorParams,
            maxsim=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            storage=qdrant_points.DenseStorage(
                qe.VectorStorageDatatype.Float16,
                qe.VectorStorageDatatype.Uint8,
                qe.Distance.Cosine,
                qe.Distance.Dot,
            ),
            sparse_params=qe.EdgeSparseVectorParams,
            idf=qe.Modifier.Idf,
        )
        config = qe.EdgeConfig(vectors=vectors, sparse_vectors=sparse, quantization_config=quant)
        self._shard = self._call(lambda: qe.EdgeShard.create(str(shard_dir), config), "create shard")

    # -- collection ---------------------------------------------------------------------------------
    def ensure_collection(self, spec: CollectionSpec) -> CollectionSpec:
        """Create or check the collection under the folder lock: two first runs started together
        both found no ``poolrag.json`` when they opened the store, and one must wait for (then use)
        the shard the other creates rather than create its own."""
        self._hold_folder(create=True)
        return super().ensure_collection(spec)

    def _load_spec(self) -> CollectionSpec | None:
        spec_file = self.root / _SPEC_FILE
        if not spec_file.exists():
            if (self.root / "shard").exists():
                raise CollectionMismatchError(
                    f"shard {self.root} was not created by poolrag (no {_SPEC_FILE}); "
                    "choose another --collection"
                )
            return None
        spec = CollectionSpec.from_metadata(self.collection, spec_file.read_text())
        if self._shard is None:  # another process created the collection since this store was opened
            self._open_shard(create=None)
        return spec

    def _write_spec(self, spec: CollectionSpec) -> None:
        """``poolrag.json`` replaced atomically: a crash leaves the old file or the new one."""
        tmp = self.root / f".{_SPEC_FILE}.tmp"
        self._call(lambda: tmp.write_text(spec.to_metadata()), "write poolrag.json")
        os.replace(tmp, self.root / _SPEC_FILE)

    def _create(self, spec: CollectionSpec) -> None:
        check_writable_folder(self.root, _WHAT, create=True)
        tmp = self.root / f".{_SPEC_FILE}.tmp"
        self._call(lambda: tmp.write_text(spec.to_metadata()), "write poolrag.json")
        self._open_shard(create=spec)
        os.replace(tmp, self.root / _SPEC_FILE)
        logger.info("created qdrant-edge shard %s (%s, %d dims)", self.root, spec.layout, spec.dimension)

    # -- writes -------------------------------------------------------------------------------------
    def _upsert(self, spec: CollectionSpec, records: Sequence[ChunkRecord]) -> None:
        import qdrant_edge as qe

        points = [
            qe.Point(r.id, qdrant_points.point_vector(spec, r, self._sparse_vector), dict(r.payload))
            for r in records
        ]
        require_room(self.root, HEADROOM_BYTES + WRITE_FACTOR * batch_bytes(records), "the next write")
        self._call(lambda: self._shard.update(qe.UpdateOperation.upsert_points(points)), "upsert")
        self._call(self._shard.flush, "flush")
        self._written = True

    def _delete(self, ids: list[str]) -> None:
        import qdrant_edge as qe

        require_room(self.root, HEADROOM_BYTES, "the next write")
        self._call(lambda: self._shard.update(qe.UpdateOperation.delete_points(ids)), "delete")
        self._call(self._shard.flush, "flush")
        self._written = True

    def optimize(self) -> None:
        """Run the shard's optimisers if this store wrote to it: an edge shard has no background
        optimiser, so without this a collection is never indexed (HNSW), its ``int8`` /
        ``binary`` codes are never built and deleted points are never vacuumed."""
        if self._shard is None or not self._written:
            return
        require_room(self.root, HEADROOM_BYTES + shard_bytes(self.root / "shard"), "optimising the shard")
        started = time.monotonic()
        logger.info("optimising the qdrant-edge shard %s (index, quantized codes, vacuum)", self.root)
        if self._call(self._shard.optimize, "optimize"):
            logger.info("optimised the qdrant-edge shard in %.1fs", time.monotonic() - started)
        self._written = False

    # -- reads --------------------------------------------------------------------------------------
    def _scroll(self, offset: Any, whole: bool) -> tuple[list[Any], Any]:
        import qdrant_edge as qe

        payload = qe.PayloadSelector.Exclude(["text"]) if whole else ["source"]
        request = qe.ScrollRequest(
            offset=offset, limit=qdrant_points.PAGE, with_payload=payload, with_vector=False
        )
        return self._call(lambda: self._shard.scroll(request), "scroll")

    def count(self) -> int:
        import qdrant_edge as qe

        return int(self._call(lambda: self._shard.count(qe.CountRequest(exact=True)), "count"))

    def _dense_params(self, spec: CollectionSpec) -> Any:
        import qdrant_edge as qe

        if spec.quantization:
            return qe.SearchParams(
                quantization=qe.QuantizationSearchParams(
                    rescore=True, oversampling=qdrant_points.oversampling(spec)
                )
            )
        return None

    def _sparse_params(self, spec: CollectionSpec) -> Any:
        """IDF over the live points for ``bm25`` (see the module docstring); nothing for learned weights."""
        import qdrant_edge as qe

        return qe.SearchParams(idf=qe.IdfParams(corpus=qe.Filter())) if spec.sparse == "bm25" else None

    def _sparse_vector(self, vector: SparseVector) -> Any:
        import qdrant_edge as qe

        return qe.SparseVector(vector.indices.tolist(), vector.values.tolist())

    def _run(
        self, query: Any, limit: int, filter: CheckedFilter | None, params: Any = None, prefetches: Any = None
    ) -> list[StoreHit]:
        import qdrant_edge as qe

        request = qe.QueryRequest(
            limit=limit,
            query=query,
            prefetches=prefetches,
            with_payload=True,
            filter=_edge_filter(filter),
            params=params,
        )
        return qdrant_points.hits(self._call(lambda: self._shard.query(request), "query"))

    def _query(self, leg: Leg, limit: int, filter: CheckedFilter | None) -> list[StoreHit]:
        return self._run(_nearest(leg), limit, filter, params=leg.params)

    def _query_fused(self, legs: list[Leg], query: HybridQuery) -> list[StoreHit]:
        import qdrant_edge as qe

        query_filter = _edge_filter(query.filter)
        prefetches = [
            qe.Prefetch(query.depth, query=_nearest(leg), filter=query_filter, params=leg.params)
            for leg in legs
        ]
        fused = qdrant_points.native_fusion(query.fusion, qe.Fusion.Dbsf, lambda k: qe.Fusion.Rrf(k=k))
        return self._run(fused, query.limit, query.filter, prefetches=prefetches)

    def _retrieve(self, ids: list[str], vectors: Any) -> list[Any]:
        """Every vector of each point (the shard takes no names)."""
        return self._call(lambda: self._shard.retrieve(ids, with_payload=False, with_vector=True), "retrieve")

    def close(self) -> None:
        if self._shard is not None:
            try:  # every write flushed already (upsert, delete); this flush only makes sure
                self._shard.flush()
                self._shard.close()
            except Exception as exc:  # closing must not raise from a finally; still, say so
                logger.warning("closing the qdrant-edge shard under %s failed: %s", self.root, exc)
            self._shard = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def _nearest(leg: Leg) -> Any:
    import qdrant_edge as qe

    return qe.Query.Nearest(leg.query, using=leg.using)


def _edge_filter(checked: CheckedFilter | None) -> Any:
    """A checked metadata filter in qdrant-edge's classes."""
    import qdrant_edge as qe

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

    return qdrant_points.payload_filter(checked, condition, qe.Filter)
