"""Milvus store (pymilvus): a Milvus Lite file by default, any Milvus server by URI.

Layouts:
  * dense: one row per chunk (``id``, ``vector``, ``text``, ``source`` + dynamic payload fields;
    payload keys that clash with columns and over-long sources: see ``milvus_payload``).
  * multivector (ColBERT): Milvus Lite has no multi-vector field, so each token vector is a row
    (``id = chunk:token``, ``chunk_id``, ``tok``) and the chunk's payload rides on token 0. Search
    runs one ANN query per query token to collect candidate chunks, then fetches *all* token rows
    of those candidates and scores them with exact MaxSim, so a chunk is never under-scored
    because some of its tokens fell outside a per-token top-k.

Quantization: Milvus Lite stores FLOAT_VECTOR only (no INT8/BINARY_VECTOR fields), so ``int8``
and ``binary`` select quantized *indexes* (HNSW_SQ with SQ8, IVF_RABITQ with 1 bit per
dimension); Lite cannot reload IVF_RABITQ in a later process, so ``binary`` is a server's only.
Collection metadata lives in collection properties.

Sparse: a collection with a sparse field has a ``SPARSE_FLOAT_VECTOR`` column with an inverted
index searched by inner product. Milvus has no IDF modifier, so for ``bm25`` collections the store
keeps the statistics IDF needs (document count and document frequencies, as
:class:`~poolrag.sparse.BM25Stats`) in a collection property, updated from the stored rows on
every upsert and delete (a re-upserted chunk's old terms are taken out first), and multiplies each
query weight by its IDF: queries carry unit weights, as for Qdrant. The property is marked stale
while a write is under way, so a write that died half-way makes the next reader count afresh.
Milvus refuses an all-zero sparse row, so a chunk without terms stores one marker term that no
query holds. Hybrid search with RRF is Milvus' ``hybrid_search`` with ``RRFRanker(60)``; the
score fusions (the default among them) fuse the two legs by :mod:`poolrag.stores.hybrid`'s rules.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.lock_holders import held_by
from poolrag.scoring.similarity import maxsim
from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import METADATA_KEY, ChunkRecord, CollectionSpec, PayloadPages, SourcePages, StoreHit
from poolrag.stores.errors import StoreRequestError, UnsafeStoreFileError, UnsupportedStoreFeature
from poolrag.stores.filters import CheckedFilter, matches
from poolrag.stores.hybrid import RRF_K, document_frequencies, with_idf
from poolrag.stores.local_paths import check_writable_folder
from poolrag.stores.milvus_filter import in_list, milvus_expression
from poolrag.stores.milvus_lite_memory import ResidentRows
from poolrag.stores.milvus_lite_server import LiteServerLease
from poolrag.stores.milvus_payload import (
    FULL_SOURCE_KEY,
    NO_SOURCE_KEY,
    RENAMED_KEY,
    SOURCE_MAX,
    SPARSE_COLUMN,
    from_entity,
    full_source,
    to_row_fields,
)
from poolrag.stores.milvus_sparse_rows import EMPTY_TERM, from_milvus_sparse_row, milvus_sparse_row
from poolrag.stores.registry import StoreLocation, module_installed
from poolrag.stores.retry import RetryPolicy
from poolrag.stores.storage_faults import StoreWriteError, storage_fault
from poolrag.stores.template import HybridQuery, StoreTemplate

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_URI = "./poolrag_milvus.db"
_TEXT_MAX = 65535
_PAGE = 1000
# Milvus Lite buffers rows in the process until this many bytes (its default: 128 MiB, ~80,000
# prose chunks), then flushes them to a segment in one step that briefly needs ~2.5x the buffer
# (measured: +316 MiB of RSS, and long enough under load for an upsert to time out). Smaller
# flushes keep that step small; flushed rows stay loaded either way.
LITE_MEMTABLE_BYTES = 32 << 20
# A server's deadline is how long an unreachable one is waited on before the retry policy takes
# over. An embedded Milvus Lite file is never unreachable, but a write waits on its flushes and
# segment merges (measured past 10 s in a 500 MB ingest on two busy cores): it gets a long one.
SERVER_DEADLINE_S = 10.0
LITE_DEADLINE_S = 300.0
#: The file in a Milvus Lite database folder that milvus-lite flocks while a process has it open
_LITE_LOCK_FILE = "LOCK"
_INDEXES: dict[str | None, tuple[str, dict[str, Any]]] = {
    None: ("AUTOINDEX", {}),
    "int8": ("HNSW_SQ", {"M": 16, "efConstruction": 200, "sq_type": "SQ8"}),
    "binary": ("IVF_RABITQ", {"nlist": 128}),
}
# Milvus Lite's graph (AUTOINDEX) loses rows beside many identical vectors: 200 identical chunks (a
# space-less text cut in pieces, a footer every page repeats) and a search from the next process
# returned copies only, at any depth, never the one other document. A Lite file's single-vector
# dense index is exact instead, as Qdrant's local mode is; measured on the 2-core EPYC, a query
# takes 59 ms against the graph's 25 at 20,000 rows, 350 against 124 at 100,000. Token vectors
# (ColBERT, pages) stay on the graph: a query searches one list per query token.
_LITE_DENSE_INDEX: tuple[str, dict[str, Any]] = ("FLAT", {})
# Milvus Lite's AUTOINDEX (and HNSW_SQ) search a graph whose candidate list defaults to about k:
# measured, a 674-chunk collection answered k=1000 with 486 rows and recall@10 was 0.94 on
# clustered text; a list of at least this many (or k) returned every row at recall 1.0, at the
# same speed. A Milvus server's AUTOINDEX sets its own search depth; the HNSW_SQ index of int8
# collections gets the same depth everywhere.
LITE_MIN_EF = 256
#: Milvus's own top-k ceiling; a larger limit is first cut to the collection's rows
_LARGE_LIMIT = 16384
_GRAPH_INDEXES = (None, "int8")  # the quantizations whose dense index is a graph (ef applies)
_STATS_KEY = f"{METADATA_KEY}_bm25"
_STALE = "stale"


class _LiteNoise(logging.Filter):
    """Drops two harmless messages Milvus Lite causes on every paginated query: its in-process
    gRPC server lacks ``AllocTimestamp``, and pymilvus then falls back to a client-side timestamp."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return "Method not implemented" not in text and "failed to get mvccTs" not in text


# Where those messages are logged: gRPC's server, and the query iterator's module, which moved
# between pymilvus 2.6 (orm.iterator) and 3.x (client.iterator.query_iterator); both are supported.
_LITE_NOISE_LOGGERS = ("grpc._server", "pymilvus.orm.iterator", "pymilvus.client.iterator.query_iterator")


class _NoTraceback(logging.Filter):
    """pymilvus logs every failed call at ERROR with a traceback, before raising it. poolrag reports
    the exception itself (one line per retry, one message when it gives up), so those are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _prepare_milvus_lite() -> None:
    # Milvus Lite logs every failed call with a traceback (8 while waiting on a lock held by another
    # process); the exception reaches poolrag, which reports it in one line.
    logging.getLogger("milvus_lite").setLevel(logging.CRITICAL)
    for name in _LITE_NOISE_LOGGERS:
        _filter_once(name, _LiteNoise)
    # Read once, when milvus_lite is first imported (pymilvus imports it on the first connect to a
    # .db file); a value set in the environment wins.
    os.environ.setdefault("MILVUS_LITE_MEMTABLE_MEMORY_LIMIT_BYTES", str(LITE_MEMTABLE_BYTES))


def _filter_once(name: str, kind: type[logging.Filter]) -> None:
    target = logging.getLogger(name)
    if not any(isinstance(f, kind) for f in target.filters):
        target.addFilter(kind())


def _refuse_functions(collection: str, info: Mapping[str, Any], where: str) -> None:
    """Refuse a collection whose schema declares functions: poolrag creates none, and Milvus runs
    them on every insert, so a database file is not configuration that makes a run call out. A
    text-embedding function sends the inserted texts to the URL it names, with ``$OPENAI_API_KEY``
    when it names no key (Milvus Lite 3.2 does, measured)."""
    functions = info.get("functions") or []
    if not functions:
        return
    named = ", ".join(f"{f.get('name')} ({getattr(f.get('type'), 'name', f.get('type'))})" for f in functions)
    raise UnsafeStoreFileError(
        f"collection {collection!r} in {where} declares functions poolrag did not create ({named}); "
        "Milvus would run them on every insert (a text-embedding function sends the texts, and an API "
        "key, to the URL it names), so it is not opened: choose another --collection"
    )


def _is_local(uri: str) -> bool:
    return "://" not in uri


# How pymilvus 2.6 releases before 2.6.11 word gRPC's UNIMPLEMENTED (the gRPC error itself is not
# kept); later ones and 3.x name UNIMPLEMENTED in the message.
_INCOMPATIBLE = "Incorrect port or sdk is incompatible with server"


def _refusal(exc: BaseException) -> str | None:
    """What a Milvus error that is not an outage says; an address that does not speak Milvus's
    protocol (another gRPC service) is named as such."""
    import grpc
    from pymilvus.exceptions import MilvusException

    if isinstance(exc, grpc.RpcError) and _grpc_code(exc) == grpc.StatusCode.UNIMPLEMENTED:
        # pymilvus passes some calls' gRPC errors through unwrapped (get_server_version)
        details = getattr(exc, "details", lambda: "")()
        return f"UNIMPLEMENTED: {details} (is a Milvus server at that --uri?)"
    if not isinstance(exc, MilvusException):
        return None
    message = " ".join(str(getattr(exc, "message", "") or exc).split())
    if "UNIMPLEMENTED" in message:
        return f"{message} (is a Milvus server at that --uri?)"
    if _INCOMPATIBLE in message:
        return f"{message} (the address answered UNIMPLEMENTED: is a Milvus server at that --uri?)"
    return message


def _grpc_code(exc: BaseException) -> object:
    """A gRPC error's status code (``grpc.RpcError`` itself declares none; its calls do)."""
    code = getattr(exc, "code", None)
    return code() if callable(code) else None


def _unavailable(exc: BaseException) -> bool:
    """Connection refused, a timeout, or a Milvus Lite file held by another process."""
    from pymilvus.exceptions import ConnectionConfigException, MilvusException, MilvusUnavailableException

    if isinstance(exc, MilvusUnavailableException):
        return True
    if isinstance(exc, ConnectionConfigException):
        return "Open local milvus failed" in str(exc) and "not exists" not in str(exc)
    if isinstance(exc, MilvusException):
        text = str(exc).lower()
        return exc.code == 2 or "unavailable" in text or "deadline" in text or "fail connecting" in text
    import grpc

    if isinstance(exc, grpc.RpcError):  # a call pymilvus passes through unwrapped (get_server_version)
        return _grpc_code(exc) in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return isinstance(exc, (ConnectionError, TimeoutError))


class MilvusStore(StoreTemplate):
    """One Milvus collection. ``uri``: a ``*.db`` path (Milvus Lite) or ``http://host:19530``."""

    name = "milvus"
    native_fusions = ("rrf",)

    def __init__(
        self,
        collection: str,
        uri: str = DEFAULT_URI,
        *,
        token: str = "",
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> None:
        uri = os.path.expanduser(uri)  # a Milvus Lite file's "~", which Milvus Lite takes as a folder name
        super().__init__(collection, uri)
        self.uri = uri  # the location, password included
        self.retry = retry or RetryPolicy()
        local = _is_local(self.uri)
        self._timeout = timeout if timeout is not None else LITE_DEADLINE_S if local else SERVER_DEADLINE_S
        _filter_once("pymilvus.decorators", _NoTraceback)
        if local:
            if not module_installed("milvus_lite"):
                raise ModuleNotFoundError(
                    'a Milvus Lite file needs the milvus extra: pip install "poolrag[milvus]" '
                    "(missing: milvus_lite)",
                    name="milvus_lite",
                )
            if not self.uri.endswith(".db"):
                raise InvalidInputError(
                    f"--uri {self.uri!r} is neither a Milvus Lite file (a path ending in .db) nor a "
                    "server URL (http://host:19530)"
                )
            _prepare_milvus_lite()
            database = Path(self.uri).resolve()
            if not database.parent.is_dir():
                missing = "is a file, not a folder" if database.parent.exists() else "does not exist"
                raise InvalidInputError(
                    f"cannot create Milvus Lite database {self.uri}: {database.parent} {missing}"
                )
            if database.is_file():  # Milvus Lite 3 keeps a database in a folder; 2.x wrote one file
                raise InvalidInputError(
                    f"--uri {self.uri}: {database} is a file, not a Milvus Lite database (a folder); "
                    "choose another path"
                )
            check_writable_folder(database.parent, "the Milvus Lite database")
            if database.is_dir():
                check_writable_folder(database, "the Milvus Lite database")
        self._resident = ResidentRows(self.uri, collection, self.count) if local else None
        self._lease = LiteServerLease(self.uri) if local else None
        if self._lease is not None:
            self._lease.acquire()
        try:
            self._client = self._call(lambda: self._connect(token), "connect")
        except BaseException:
            if self._lease is not None:
                self._lease.release()
            raise

    @classmethod
    def local_data(cls, collection: str, location: StoreLocation) -> Path | None:
        """A Milvus Lite file (every collection in one), or ``None`` for a server."""
        if location.path is not None or location.url is not None:
            return None
        uri = location.uri or DEFAULT_URI
        return None if "://" in uri else Path(uri)

    @classmethod
    def open(cls, collection: str, address: StoreLocation) -> MilvusStore:
        address.refuse_other_than(
            ("uri",), "milvus takes --uri (a .db file or a server URL), not --path/--url"
        )
        return cls(collection, address.uri or DEFAULT_URI, token=address.api_key or "", retry=address.retry)

    def _connect(self, token: str) -> Any:
        from pymilvus import MilvusClient

        client = MilvusClient(uri=self.uri, token=token, timeout=self._timeout)
        if not _is_local(self.uri):
            # pymilvus reuses a connection it holds to the same URI without a call, so another
            # service now answering at that address would go unnoticed until the first request
            client.get_server_version()
        return client

    def _call(self, fn: Callable[[], T], what: str) -> T:
        try:
            return self.retry.call_client(fn, what, self.where, self._unavailable_message)
        except Exception as exc:
            cause = storage_fault(exc) if _is_local(self.uri) else None
            if cause is not None:
                raise StoreWriteError(f"cannot write the Milvus Lite database {self.uri}: {cause}") from None
            refusal = _refusal(exc)
            if refusal is None:
                raise
            raise StoreRequestError(f"{self.where} refused {what}: {refusal}") from exc

    def _unavailable_message(self, exc: Exception) -> str | None:
        if not _unavailable(exc):
            return None
        message = str(exc)
        if _is_local(self.uri) and "Open local milvus failed" in message:
            holder = held_by(Path(self.uri) / _LITE_LOCK_FILE)
            if holder:
                return f"Milvus Lite could not open {self.uri}: another process has it open ({holder})"
            return f"Milvus Lite could not open {self.uri}; is another process using it? ({exc})"
        return message

    # -- collection ---------------------------------------------------------------------------------
    def _load_spec(self) -> CollectionSpec | None:
        if not self._call(lambda: self._client.has_collection(self.collection), "has_collection"):
            return None
        info = self._call(lambda: self._client.describe_collection(self.collection), "describe_collection")
        _refuse_functions(self.collection, info, self.where)
        raw = (info.get("properties") or {}).get(METADATA_KEY)
        spec = CollectionSpec.from_collection_metadata(self.collection, raw, self.where)
        # A reopened collection starts released; searching and querying need it loaded.
        self._call(lambda: self._client.load_collection(self.collection), "load_collection")
        return spec

    def _write_spec(self, spec: CollectionSpec) -> None:
        """One collection property replaced: the metadata and the data are never half-written."""
        text = spec.to_metadata()
        self._call(
            lambda: self._client.alter_collection_properties(self.collection, {METADATA_KEY: text}),
            "alter_collection_properties",
        )

    def _create(self, spec: CollectionSpec) -> None:
        from pymilvus import DataType, MilvusClient

        if spec.multivector_dimension is not None:
            raise UnsupportedStoreFeature(
                "Milvus stores ColBERT token vectors one row per token, in a collection of their own "
                "(layout 'multivector'); a token-vector field next to a dense one needs qdrant or qdrant-edge"
            )
        if spec.quantization == "binary" and _is_local(self.uri):
            # Lite builds IVF_RABITQ and searches it in the process that made it, but no later
            # process can load it (milvus-lite 3.2.2: "unknown index_type"): refused before any write
            raise UnsupportedStoreFeature(
                "Milvus Lite cannot reopen a binary (IVF_RABITQ) index: a later search or ingest would "
                "fail to load the collection. Use --index-quantization int8 (HNSW_SQ), a Milvus server "
                "(--uri http://...), or --store qdrant-edge"
            )
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
        if spec.layout == "multivector":
            schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=96)
            schema.add_field("chunk_id", DataType.VARCHAR, max_length=64)
            schema.add_field("tok", DataType.INT64)
        else:
            schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=spec.dimension)
        schema.add_field("source", DataType.VARCHAR, max_length=SOURCE_MAX)
        index = self._client.prepare_index_params()
        exact = _is_local(self.uri) and spec.quantization is None and spec.layout != "multivector"
        index_type, params = _LITE_DENSE_INDEX if exact else _INDEXES[spec.quantization]
        index.add_index("vector", index_type=index_type, metric_type="COSINE", params=params)
        properties = {METADATA_KEY: spec.to_metadata()}
        if spec.sparse is not None:
            schema.add_field(SPARSE_COLUMN, DataType.SPARSE_FLOAT_VECTOR)
            index.add_index(SPARSE_COLUMN, index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        if spec.sparse == "bm25":
            properties[_STATS_KEY] = _stats_json(0, {})
        if _is_local(self.uri):
            self._create_lite(schema, index, properties)
        else:
            self._call(
                lambda: self._client.create_collection(
                    self.collection,
                    schema=schema,
                    index_params=index,
                    properties=properties,
                ),
                "create_collection",
            )
        logger.info(
            "created milvus collection %r (%s, %d dims, %s index)",
            spec.name,
            spec.layout,
            spec.dimension,
            index_type,
        )

    def _create_lite(self, schema: Any, index: Any, properties: dict[str, str]) -> None:
        """Create, index and load a Milvus Lite collection without pymilvus's index wait.

        ``create_collection`` with index parameters polls the index state after a fixed 0.5 s
        sleep; Milvus Lite builds an empty collection's index inside the call, so the wait is half
        a second added to every ingest into a new collection.
        """
        self._call(
            lambda: self._client.create_collection(self.collection, schema=schema, properties=properties),
            "create_collection",
        )
        self._call(lambda: self._client.create_index(self.collection, index, sync=False), "create_index")
        self._call(lambda: self._client.load_collection(self.collection), "load_collection")

    def _layout(self) -> str:
        spec = self.read_spec()
        return spec.layout if spec else "dense"

    # -- writes -------------------------------------------------------------------------------------
    def _rows(self, record: ChunkRecord) -> list[dict[str, Any]]:
        source, fields = to_row_fields(record.payload)
        text = fields.get("text", "")
        if isinstance(text, str) and len(text.encode("utf-8", "surrogatepass")) > _TEXT_MAX:
            raise InvalidInputError(
                f"{full_source({'source': source, **fields})}: a chunk at characters "
                f"{fields.get('start')}-{fields.get('end')} is longer than Milvus's {_TEXT_MAX}-byte text "
                "limit; use a smaller --chunk-tokens or another store"
            )
        if self._layout() == "dense":
            row = {
                **fields,
                "id": record.id,
                "vector": np.asarray(record.vector, dtype=np.float32).tolist(),
                "source": source,
            }
            if record.sparse is not None:
                row[SPARSE_COLUMN] = milvus_sparse_row(record.sparse)
            return [row]
        rows = []
        for tok, vec in enumerate(np.asarray(record.vector, dtype=np.float32)):
            token = {"id": f"{record.id}:{tok}", "chunk_id": record.id, "tok": tok, "vector": vec.tolist()}
            rows.append({**(fields if tok == 0 else {}), **token, "source": source})
        return rows

    def _upsert(self, spec: CollectionSpec, records: Sequence[ChunkRecord]) -> None:
        if spec.layout == "multivector":
            # A re-embedded chunk may have fewer tokens than before: clear its old rows first.
            self.delete([r.id for r in records])
        rows = [row for r in records for row in self._rows(r)]
        if self._resident is not None:
            self._resident.add(rows, len(records))
        stored = [] if spec.layout == "multivector" else self._stored_ids([r.id for r in records])
        # Milvus keeps the last of several rows with one id; so do the statistics.
        latest = {r.id: r.sparse for r in records if r.sparse is not None}
        self._keeping_stats(list(latest), latest.values(), lambda: self._write_rows(rows, stored))

    def _write_rows(self, rows: list[dict[str, Any]], stored: list[str]) -> None:
        """Upsert ``rows``, then write those of ``stored`` ids again in place of their deleted old
        rows: Milvus Lite's upsert keeps a dynamic field the new row lacks (a field dropped from a
        JSONL record stayed in every hit, and each re-run wrote the row again). The first upsert is
        where Milvus refuses a batch it cannot hold, before any stored row is deleted."""
        self._call(lambda: self._client.upsert(self.collection, rows, timeout=self._timeout), "upsert")
        if not stored:
            return
        held = set(stored)
        again = [row for row in rows if row["id"] in held]
        self._delete_rows(stored)
        self._call(lambda: self._client.upsert(self.collection, again, timeout=self._timeout), "upsert")

    def _delete(self, ids: list[str]) -> None:
        self._keeping_stats(ids, (), lambda: self._delete_rows(ids))

    def _delete_rows(self, ids: list[str]) -> None:
        for start in range(0, len(ids), _PAGE):
            part = ids[start : start + _PAGE]
            if self._layout() == "multivector":
                expr = in_list("chunk_id", part)
                self._call(lambda e=expr: self._client.delete(self.collection, filter=e), "delete")
            else:
                self._call(lambda p=part: self._client.delete(self.collection, ids=p), "delete")

    # -- reads --------------------------------------------------------------------------------------
    def _iterate(self, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self._scan(expr, fields, out.extend, out.clear)
        return out

    def _scan(
        self,
        expr: str,
        fields: list[str],
        consume: Callable[[list[dict[str, Any]]], None],
        restart: Callable[[], None] = lambda: None,
    ) -> None:
        """Hand the matching rows to ``consume`` a page at a time; a retry calls ``restart`` first."""

        def run() -> None:
            restart()
            it = self._client.query_iterator(
                self.collection, batch_size=_PAGE, filter=expr, output_fields=fields
            )
            try:
                while batch := it.next():
                    consume(batch)
            finally:
                it.close()

        self._call(run, "query")

    def scan_sources(self, consume: SourcePages) -> None:
        key = "chunk_id" if self._layout() == "multivector" else "id"
        expr = "tok == 0" if key == "chunk_id" else ""
        fields = ["chunk_id", "source", FULL_SOURCE_KEY] if key == "chunk_id" else ["source", FULL_SOURCE_KEY]
        self._scan(expr, fields, lambda rows: consume([(r[key], full_source(r)) for r in rows]))

    def scan_payloads(self, consume: PayloadPages) -> None:
        """The payloads as search returns them (a ColBERT chunk's on its token 0), without text;
        the dynamic fields come whole (Milvus cannot leave one out), the vectors not at all."""
        key = "chunk_id" if self._layout() == "multivector" else "id"
        expr = "tok == 0" if key == "chunk_id" else ""
        fields = [key, "source", "$meta"] if key == "chunk_id" else ["source", "$meta"]

        def page(rows: list[dict[str, Any]]) -> None:
            payloads = ((r[key], from_entity(r)) for r in rows)
            consume([(cid, {k: v for k, v in payload.items() if k != "text"}) for cid, payload in payloads])

        self._scan(expr, fields, page)

    def count(self) -> int:
        expr = "tok == 0" if self._layout() == "multivector" else ""
        rows = self._call(
            lambda: self._client.query(self.collection, filter=expr, output_fields=["count(*)"]), "count"
        )
        return int(rows[0]["count(*)"])

    def _scope(self, checked: CheckedFilter | None) -> str | None:
        """The filter as an expression over dense rows; ``None`` when no chunk matches."""
        if checked and all(isinstance(v, str) for values in checked.values() for v in values):
            return milvus_expression(checked)  # strings compare exactly in Milvus: filter in the search
        if checked:
            matching = self._matching(checked, "id")
            return in_list("id", matching) if matching else None
        return ""

    def _dense_params(self, spec: CollectionSpec, limit: int) -> dict[str, Any]:
        """The dense search's parameters: on Milvus Lite's graph indexes a candidate list deep
        enough for ``limit`` rows at full recall (:data:`LITE_MIN_EF`)."""
        params: dict[str, Any] = {"metric_type": "COSINE"}
        # the HNSW_SQ index poolrag creates is a graph on a server too; a server's AUTOINDEX is its own
        if spec.quantization == "int8" or (_is_local(self.uri) and spec.quantization in _GRAPH_INDEXES):
            params["params"] = {"ef": max(limit, LITE_MIN_EF)}
        return params

    def _within_rows(self, limit: int) -> int:
        """``limit``, or past :data:`_LARGE_LIMIT` the collection's row count: Milvus allocates the
        whole result up front (``-k 100000000000``: 745 GiB), where Qdrant returns what there is."""
        return limit if limit <= _LARGE_LIMIT else max(1, min(limit, self.count()))

    def _search(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        expr = self._scope(filter)
        if expr is None:
            return []
        limit = self._within_rows(limit)
        return self._ann([query.tolist()], "vector", self._dense_params(spec, limit), expr, limit)

    def _ann(
        self, data: list[Any], field: str, params: dict[str, Any], expr: str, limit: int
    ) -> list[StoreHit]:
        res = self._call(
            lambda: self._client.search(
                self.collection,
                data,
                anns_field=field,
                search_params=params,
                filter=expr,
                limit=limit,
                output_fields=["*"],
            ),
            "search",
        )
        return _hits(res[0])

    def _sparse_query(self, spec: CollectionSpec, sparse: SparseVector) -> dict[int, float]:
        """The query as Milvus takes it, times IDF in ``bm25`` collections; empty when it has no term."""
        if spec.sparse == "bm25":
            sparse = with_idf(sparse, *self._counts())
        return {t: w for t, w in sparse.to_dict().items() if t != EMPTY_TERM}

    def _search_sparse(
        self, spec: CollectionSpec, query: SparseVector, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Inner product with the stored sparse rows (times IDF from the kept statistics for bm25)."""
        weights = self._sparse_query(spec, query)
        expr = self._scope(filter)
        if expr is None or not weights:
            return []
        return self._ann([weights], SPARSE_COLUMN, {"metric_type": "IP"}, expr, self._within_rows(limit))

    def _search_hybrid(self, spec: CollectionSpec, query: HybridQuery) -> list[StoreHit]:
        """Plain RRF runs in Milvus (``hybrid_search``, ``RRFRanker(60)``, the filter in both requests);
        the score fusions and weighted RRF are computed from the two legs (``WeightedRanker`` squashes
        inner products through arctan, which is none of the shared rules)."""
        from pymilvus import AnnSearchRequest, RRFRanker

        weights = self._sparse_query(spec, query.sparse)
        expr = self._scope(query.filter)
        if expr is None:
            return []
        query = dataclasses.replace(
            query, depth=self._within_rows(query.depth), limit=self._within_rows(query.limit)
        )
        legs = [
            ([query.dense.tolist()], "vector", self._dense_params(spec, query.depth)),
            ([weights], SPARSE_COLUMN, {"metric_type": "IP"}),
        ]
        requests = [
            AnnSearchRequest(data=data, anns_field=field, param=param, limit=query.depth, expr=expr)
            for data, field, param in legs
        ]
        res = self._call(
            lambda: self._client.hybrid_search(
                self.collection, requests, RRFRanker(RRF_K), limit=query.limit, output_fields=["*"]
            ),
            "hybrid_search",
        )
        return _hits(res[0])

    # -- BM25 statistics ----------------------------------------------------------------------------
    def _counts(self) -> tuple[int, dict[int, int]]:
        info = self._call(lambda: self._client.describe_collection(self.collection), "describe_collection")
        raw = (info.get("properties") or {}).get(_STATS_KEY)
        if raw and raw != _STALE:
            data = json.loads(raw)
            frequency = {int(k): int(v) for k, v in data["document_frequency"].items()}
            return int(data["document_count"]), frequency
        logger.warning("BM25 statistics of milvus collection %r are stale; counting again", self.collection)
        rows = self._iterate("", [SPARSE_COLUMN])
        count, frequency = document_frequencies(from_milvus_sparse_row(r[SPARSE_COLUMN]) for r in rows)
        self._write_stats(_stats_json(count, frequency))
        return count, frequency

    def _keeping_stats(self, old: list[str], new: Iterable[SparseVector], write: Callable[[], None]) -> None:
        """``write``; in a ``bm25`` collection the statistics are marked stale meanwhile, then stored
        without the terms of the ``old`` ids' stored rows and with those of the ``new`` vectors."""
        spec = self.read_spec()
        if spec is None or spec.sparse != "bm25":
            write()
            return
        count, frequency = self._counts()
        self._write_stats(_STALE)
        old_count, old_frequency = document_frequencies(self.fetch_sparse(old).values())
        new_count, new_frequency = document_frequencies(new)
        write()
        frequency = _add(_add(frequency, old_frequency, -1), new_frequency, 1)
        self._write_stats(_stats_json(count - old_count + new_count, frequency))

    def _write_stats(self, text: str) -> None:
        self._call(
            lambda: self._client.alter_collection_properties(self.collection, {_STATS_KEY: text}),
            "alter_collection_properties",
        )

    def _fetch_sparse(self, ids: list[str]) -> dict[str, SparseVector]:
        """Stored sparse vectors by id (a chunk without terms comes back empty)."""
        rows = self._rows_by_id(ids, SPARSE_COLUMN)
        return {str(row["id"]): from_milvus_sparse_row(row[SPARSE_COLUMN]) for row in rows}

    def _stored_ids(self, ids: list[str]) -> list[str]:
        """Which of ``ids`` the collection holds as dense rows."""
        return [str(row["id"]) for row in self._rows_by_id(list(dict.fromkeys(ids)), "id")]

    def _rows_by_id(self, ids: list[str], field: str) -> list[dict[str, Any]]:
        """The ``id`` and ``field`` of each dense row of ``ids``, a page of ids per query."""
        rows: list[dict[str, Any]] = []
        for start in range(0, len(ids), _PAGE):
            part = ids[start : start + _PAGE]
            rows += self._call(
                lambda p=part: self._client.query(self.collection, ids=p, output_fields=[field]), "query"
            )
        return rows

    def _search_multivector(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Per-token ANN for candidates, then exact MaxSim over every token of each candidate.

        The payload rides on token 0 only, so a filter first selects the matching chunks and the
        per-token search is then confined to their rows.
        """
        limit = self._within_rows(limit)
        per_token = max(4 * limit, 32)
        scope = ""
        if filter:
            matching = self._matching(filter, "chunk_id")
            if not matching:
                return []
            scope = in_list("chunk_id", matching)
        res = self._call(
            lambda: self._client.search(
                self.collection,
                query.tolist(),
                search_params=self._dense_params(spec, per_token),
                filter=scope,
                limit=per_token,
                output_fields=["chunk_id"],
            ),
            "search",
        )
        candidates = list(dict.fromkeys(h["entity"]["chunk_id"] for row in res for h in row))
        if not candidates:
            return []
        token_vectors = self.fetch_vectors(candidates)
        scored = sorted(
            ((cid, maxsim(query, mat)) for cid, mat in token_vectors.items()), key=lambda x: -x[1]
        )[:limit]
        top = [cid for cid, _ in scored]
        rows = self._call(
            lambda: self._client.query(
                self.collection, filter=f"{in_list('chunk_id', top)} and tok == 0", output_fields=["*"]
            ),
            "query",
        )
        payloads = {row["chunk_id"]: from_entity(row) for row in rows}
        return [StoreHit(cid, float(score), payloads.get(cid, {})) for cid, score in scored]

    def _matching(self, checked: CheckedFilter, id_field: str) -> list[str]:
        """Ids of the chunks whose payload matches ``checked`` exactly. Milvus compares JSON booleans
        as 0 and 1, so what its expression selects is confirmed against the payload here."""
        expr = milvus_expression(checked)
        if id_field == "chunk_id":
            expr = f"tok == 0 and ({expr})"
        fields = [id_field, "source", FULL_SOURCE_KEY, NO_SOURCE_KEY, RENAMED_KEY, *checked]
        rows = self._iterate(expr, list(dict.fromkeys(fields)))
        return [str(row[id_field]) for row in rows if matches(from_entity(row), checked)]

    def _fetch_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        if self._layout() == "dense":
            return {
                str(row["id"]): np.asarray(row["vector"], dtype=np.float32)
                for row in self._rows_by_id(ids, "vector")
            }
        tokens: dict[str, dict[int, list[float]]] = {}
        for start in range(0, len(ids), _PAGE):
            expr = in_list("chunk_id", ids[start : start + _PAGE])
            for row in self._iterate(expr, ["chunk_id", "tok", "vector"]):
                tokens.setdefault(row["chunk_id"], {})[int(row["tok"])] = row["vector"]
        return {
            cid: np.asarray([rows[i] for i in sorted(rows)], dtype=np.float32) for cid, rows in tokens.items()
        }

    def close(self) -> None:
        """Close the client; a Milvus Lite file is free for another process once poolrag's last
        store on it closes (see :mod:`poolrag.stores.milvus_lite_server`)."""
        try:
            self._client.close()
        except Exception:  # closing a dead connection must not mask the real error
            logger.debug("closing milvus client failed", exc_info=True)
        if self._lease is not None:
            self._lease.release()


def _hits(rows: Any) -> list[StoreHit]:
    return [StoreHit(str(h["id"]), float(h["distance"]), from_entity(h.get("entity") or {})) for h in rows]


def _add(frequency: dict[int, int], change: dict[int, int], sign: int) -> dict[int, int]:
    out = dict(frequency)
    for term, n in change.items():
        left = out.get(term, 0) + sign * n
        if left:
            out[term] = left
        else:
            out.pop(term, None)
    return out


def _stats_json(count: int, frequency: dict[int, int]) -> str:
    """The statistics as :meth:`poolrag.sparse.BM25Stats.to_json` writes them (lengths not kept)."""
    return json.dumps(
        {
            "format": 1,
            "document_count": count,
            "total_length": 0,
            "document_frequency": {str(k): v for k, v in sorted(frequency.items())},
        },
        separators=(",", ":"),
    )
