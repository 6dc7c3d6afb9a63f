"""Qdrant Edge store (qdrant-edge-py): Qdrant's Rust engine running inside this process.

No server and no client/server hop: a shard is a folder. An edge shard has no collection
metadata of its own, so poolrag's description sits next to it in ``poolrag.json`` (written
atomically, before the shard is created, so a shard without it is never left behind by poolrag).
Layout on disk: ``<path>/<collection>/shard`` and ``<path>/<collection>/poolrag.json``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.stores.base import ChunkRecord, CollectionSpec, StoreHit, ensure_against
from poolrag.stores.errors import CollectionMismatchError, StoreUnavailableError
from poolrag.stores.filters import CheckedFilter, MetadataFilter, check_filter
from poolrag.stores.local_paths import check_writable_folder
from poolrag.stores.names import check_collection_name
from poolrag.stores.retry import RetryPolicy

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PATH = "./poolrag_edge"
_SPEC_FILE = "poolrag.json"
_PAGE = 1000


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
        def attempt() -> T:
            try:
                return fn()
            except Exception as exc:
                if _unavailable(exc):
                    raise StoreUnavailableError(str(exc)) from exc
                raise

        return self.retry.call(attempt, what, f"qdrant-edge at {self.location}")

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
        config = qe.EdgeConfig(vectors=params, quantization_config=quant)
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
        points = [
            qe.Point(r.id, np.asarray(r.vector, dtype=np.float32).tolist(), dict(r.payload)) for r in records
        ]
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

    def _query(self, vector: Any, limit: int, filter: MetadataFilter | None) -> list[StoreHit]:
        import qdrant_edge as qe

        query_filter = _edge_filter(check_filter(filter))
        spec = self.read_spec()
        params = None
        if spec is not None and spec.quantization:
            params = qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True, oversampling=2.0))
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vector), with_payload=True, filter=query_filter, params=params
        )
        points = self._call(lambda: self._shard.query(request), "query")
        return [StoreHit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]

    def search(self, vector: np.ndarray, limit: int, filter: MetadataFilter | None = None) -> list[StoreHit]:
        return self._query(np.asarray(vector, dtype=np.float32).tolist(), limit, filter)

    def search_multivector(
        self, vectors: np.ndarray, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        return self._query(np.asarray(vectors, dtype=np.float32).tolist(), limit, filter)

    def fetch_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        records = self._call(
            lambda: self._shard.retrieve(list(ids), with_payload=False, with_vector=True), "retrieve"
        )
        out = {}
        for r in records:
            vec = r.vector[""] if isinstance(r.vector, dict) else r.vector
            out[str(r.id)] = np.asarray(vec, dtype=np.float32)
        return out

    def close(self) -> None:
        if self._shard is not None:
            try:
                self._shard.flush()
                self._shard.close()
            except Exception:
                logger.debug("closing qdrant-edge shard failed", exc_info=True)
            self._shard = None


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
