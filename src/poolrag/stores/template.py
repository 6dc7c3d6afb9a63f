"""The store template: the public methods of :class:`~poolrag.stores.base.VectorStore` run every
shared check once (collection exists and has the field asked for, record fields, query shapes,
limits, filters, fusion rules) and then call a small per-store hook (``_upsert``, ``_search``, ...).

So every store refuses the same bad input with the same message before its database sees it, and a
new store writes only what its database does differently.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import (
    ChunkRecord,
    CollectionSpec,
    HybridFusion,
    PayloadPages,
    SourcePages,
    StoreHit,
)
from poolrag.stores.errors import CollectionMismatchError, CollectionNotFoundError, UnsupportedStoreFeature
from poolrag.stores.filters import CheckedFilter, MetadataFilter, check_filter
from poolrag.stores.hybrid import (
    check_fusion,
    check_limit,
    check_query_sparse,
    check_record_fields,
    local_fusion,
    prefetch_depth,
)
from poolrag.stores.language_prior import collection_default_fusion
from poolrag.stores.names import check_collection_name
from poolrag.stores.registry import StoreLocation
from poolrag.stores.vector_types import check_index_quantization, check_unit_length


@dataclass(frozen=True)
class HybridQuery:
    """A checked hybrid search as a store that fuses natively gets it: both legs ``depth`` deep."""

    dense: np.ndarray
    sparse: SparseVector
    limit: int
    depth: int
    filter: CheckedFilter | None
    fusion: HybridFusion


class StoreTemplate(ABC):
    """One collection in one database; subclasses fill in the hooks below.

    ``native_fusions``: the hybrid rules the database fuses itself; every other rule (and a query
    without terms) is fused from the two legs by :func:`poolrag.stores.hybrid.local_fusion`.
    ``vector_types``: what the database can store a dense vector as
    (:mod:`poolrag.stores.vector_types`). The template encodes records and re-ranks uint8 hits, so
    a hook only declares the collection's type to its database.
    """

    name: str  # each kind's, on the class (the VectorStore protocol reads it as a property)
    native_fusions: ClassVar[tuple[str, ...]] = ()
    vector_types: ClassVar[tuple[str, ...]] = ("float32",)

    def __init__(self, collection: str, location: str) -> None:
        self.collection = check_collection_name(collection)
        self.location = _without_password(location)
        self._spec: CollectionSpec | None = None

    @classmethod
    def open(cls, collection: str, address: StoreLocation) -> StoreTemplate:
        """The store as :func:`~poolrag.stores.open_store` opens it; this default takes no location."""
        address.refuse_other_than(
            (), f"{cls.name} keeps its chunks in this process: give no --uri/--path/--url"
        )
        return cls(collection)  # type: ignore[call-arg]

    @property
    def where(self) -> str:
        """The store and its location, for messages."""
        return f"{self.name} at {self.location}"

    # -- collection ---------------------------------------------------------------------------------
    def read_spec(self) -> CollectionSpec | None:
        """The collection's poolrag metadata; ``None`` if it does not exist."""
        if self._spec is None:
            self._spec = self._load_spec()
        return self._spec

    @classmethod
    def local_data(cls, collection: str, location: StoreLocation) -> Path | None:
        """The file or folder this store keeps ``collection`` in at ``location`` (``None``: a
        server, or a location this store refuses when opened); each embedded store says its own."""
        return None

    @classmethod
    def check_vector_type(cls, vector_type: str) -> None:
        """Refuse a dense vector type this database cannot store (before anything is created)."""
        if vector_type not in cls.vector_types:
            raise InvalidInputError(
                f"{cls.name} stores {' or '.join(cls.vector_types)} vectors, not {vector_type}: "
                f"store {vector_type} vectors in Qdrant (--store qdrant or qdrant-edge)"
            )

    def ensure_collection(self, spec: CollectionSpec) -> CollectionSpec:
        """Create the collection, or check an existing one against ``spec`` and return the stored spec."""
        stored = self.read_spec()
        if stored is None:
            self.check_vector_type(spec.vector_type)
            check_index_quantization(spec.vector_type, spec.quantization)
            self._create(spec)
            self._spec = spec
            return spec
        spec.check_compatible(stored, self.where)
        if spec.quantization is not None and stored.quantization != spec.quantization:
            # a run that leaves the flag out keeps the collection's index, as it keeps its ranges
            held = f"a {stored.quantization} index" if stored.quantization else "no index quantization"
            raise CollectionMismatchError(
                f"collection {spec.name!r} at {self.where} has {held}, not {spec.quantization}: a "
                "collection keeps the index it was created with; leave --index-quantization out or "
                "ingest into another --collection"
            )
        return stored

    def update_spec(self, spec: CollectionSpec) -> None:
        """Rewrite an existing collection's poolrag metadata (same layout and model, e.g. with a saved
        retrieval record); refused when ``spec`` describes other vectors."""
        spec.check_compatible(self._require_spec(spec.name), self.where)
        self._write_spec(spec)
        self._spec = spec

    def _require_spec(self, name: str | None = None) -> CollectionSpec:
        spec = self.read_spec()
        if spec is None:
            raise CollectionNotFoundError(
                f"collection {name or self.collection!r} in {self.where} does not exist"
            )
        return spec

    def _sparse_spec(self) -> CollectionSpec:
        spec = self._require_spec()
        if spec.sparse is None:
            raise UnsupportedStoreFeature(
                f"collection {spec.name!r} in {self.where} has no sparse field (it was created for dense "
                "search); ingest into a new collection with sparse vectors for sparse or hybrid search"
            )
        return spec

    # -- writes -------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        """Store ``records``; re-upserting an id replaces that chunk."""
        if not records:
            return
        spec = self._require_spec()
        for record in records:
            _check_record_vector(spec, record)
            check_record_fields(spec, record)
        if spec.vector_type != "float32":  # what the server would send for this type, as one batch
            rows = np.stack([r.vector for r in records])
            encoded = spec.stored_vectors.encode(rows)
            check_unit_length(rows, spec.vector_type)
            records = [dataclasses.replace(r, vector=row) for r, row in zip(records, encoded, strict=True)]
        self._upsert(spec, records)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove chunks by id (ids not stored are ignored)."""
        unique = list(dict.fromkeys(ids))
        if unique:
            self._delete(unique)

    # -- reads --------------------------------------------------------------------------------------
    def search(self, vector: np.ndarray, limit: int, filter: MetadataFilter | None = None) -> list[StoreHit]:
        """Chunks by cosine similarity to ``vector``, among those whose payload matches ``filter``."""
        spec = self._require_spec()
        query = self._dense_query(spec, vector)
        limit = check_limit(limit)
        checked = check_filter(filter)
        codec = spec.stored_vectors
        if spec.vector_type != "float32":  # compared by dot product with unit vectors: a cosine
            query = query / max(float(np.linalg.norm(query)), 1e-12)
        if not codec.rescored:
            return self._search(spec, query, limit, checked)
        shortlist = self._search(spec, codec.first_stage_query(query), codec.candidates(limit), checked)
        return self._rescored(spec, query, shortlist, limit)

    def _rescored(
        self, spec: CollectionSpec, query: np.ndarray, shortlist: list[StoreHit], limit: int
    ) -> list[StoreHit]:
        """The database's uint8 shortlist re-ranked by the float query's dot product with each stored
        vector's bucket centres (:mod:`poolrag.stores.vector_types`)."""
        stored = self._fetch_vectors([hit.id for hit in shortlist])
        kept = [hit for hit in shortlist if hit.id in stored]  # a chunk deleted in between
        if not kept:
            return []
        centres = spec.stored_vectors.decode(np.stack([stored[hit.id] for hit in kept]))
        scores = centres @ query
        order = np.argsort(-scores, kind="stable")[:limit]
        return [dataclasses.replace(kept[i], score=float(scores[i])) for i in order]

    def _dense_query(self, spec: CollectionSpec, vector: Any) -> np.ndarray:
        if spec.layout != "dense":
            raise InvalidInputError(f"collection {spec.name!r} holds token vectors; use search_multivector")
        given = np.asarray(vector)
        if given.dtype in (np.int8, np.uint8):  # /v2/embed's codes: ranked as floats, silently wrong
            raise InvalidInputError(
                f"query must be the float embedding, not {given.dtype} values (already quantized?): the "
                "store compares the float query with what each stored value stands for"
            )
        query = given.astype(np.float32, copy=False)
        if query.shape != (spec.dimension,):
            raise InvalidInputError(f"query must be a [{spec.dimension}] vector, got shape {query.shape}")
        return query

    def search_multivector(
        self, vectors: np.ndarray, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """ColBERT: chunks by MaxSim of the ``[T, D]`` query token vectors, the best ``limit`` among
        those matching ``filter``; in a dense collection with a token-vector field, by that field."""
        spec = self._require_spec()
        if spec.layout != "multivector" and spec.multivector_dimension is None:
            raise InvalidInputError(f"collection {spec.name!r} holds single vectors; use search")
        size = spec.multivector_dimension or spec.dimension
        query = np.asarray(vectors, dtype=np.float32)
        if query.ndim != 2 or query.shape[1] != size:
            raise InvalidInputError(f"query must be a [tokens, {size}] matrix, got shape {query.shape}")
        limit = check_limit(limit)
        checked = check_filter(filter)
        if len(query) == 0:
            return []
        return self._search_multivector(spec, query, limit, checked)

    def search_sparse(
        self, sparse: SparseVector, limit: int, filter: MetadataFilter | None = None
    ) -> list[StoreHit]:
        """Chunks sharing a term with ``sparse``, by inner product (times IDF in ``bm25`` collections)."""
        spec = self._sparse_spec()
        query = check_query_sparse(sparse)
        limit = check_limit(limit)
        checked = check_filter(filter)
        if not len(query):
            return []
        return self._search_sparse(spec, query, limit, checked)

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
        """The dense and the sparse ranking (``prefetch`` deep each, default ``max(limit, 50)``) fused
        by ``fusion`` (default: the collection's own,
        :func:`~poolrag.stores.language_prior.collection_default_fusion`); ``filter`` applies to both.
        Scores are the fused ones."""
        spec = self._sparse_spec()
        fusion = check_fusion(collection_default_fusion(spec) if fusion is None else fusion)
        depth = prefetch_depth(limit, prefetch)
        query = check_query_sparse(sparse)
        checked = check_filter(filter)
        if fusion not in self.native_fusions or not len(query) or spec.stored_vectors.rescored:
            return local_fusion(self, dense, query if len(query) else None, limit, depth, filter, fusion)
        legs = HybridQuery(self._dense_query(spec, dense), query, limit, depth, checked, fusion)
        return self._search_hybrid(spec, legs)

    def fetch_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (``[D]`` or ``[T, D]``), as float32: a float16 vector widened, a uint8
        one as its bucket centres."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        found = self._fetch_vectors(unique)
        spec = self.read_spec()
        if spec is None or spec.vector_type == "float32" or not found:
            return found
        codec = spec.stored_vectors
        return {chunk: codec.decode(vector) for chunk, vector in found.items()}

    def fetch_sparse(self, ids: Sequence[str]) -> dict[str, SparseVector]:
        """Stored sparse vectors by id, in a collection with a sparse field."""
        self._sparse_spec()
        unique = list(dict.fromkeys(ids))
        return self._fetch_sparse(unique) if unique else {}

    def list_sources(self) -> dict[str, str]:
        """Every chunk id in the collection, mapped to its source (in memory: a caller that may meet
        a large collection takes :meth:`scan_sources`' pages instead)."""
        sources: dict[str, str] = {}
        self.scan_sources(sources.update)
        return sources

    @abstractmethod
    def scan_sources(self, consume: SourcePages) -> None:
        """Hand every ``(chunk id, source)`` pair to ``consume`` a page at a time; a scan retried
        after a dropped connection starts over, so ``consume`` must accept pairs twice."""

    @abstractmethod
    def scan_payloads(self, consume: PayloadPages) -> None:
        """Hand every ``(chunk id, payload without its text)`` pair to ``consume`` a page at a
        time, each payload as search returns it; a retried scan starts over, as
        :meth:`scan_sources`'."""

    @abstractmethod
    def count(self) -> int:
        """Number of chunks (not token rows)."""

    def optimize(self) -> None:
        """Nothing: Milvus and a Qdrant server index and vacuum in the background, Qdrant local
        mode and memory search exactly; Qdrant Edge has no background optimiser and overrides it."""
        return None

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Closed on the way out: an embedded database left open until the interpreter shuts down
        is closed by its client's finaliser then, which fails noisily (qdrant-client's does)."""
        self.close()

    # -- hooks: what each database does its own way ----------------------------------------------------
    @abstractmethod
    def _load_spec(self) -> CollectionSpec | None:
        """The stored poolrag metadata, read from the database; ``None`` if there is no collection."""

    @abstractmethod
    def _create(self, spec: CollectionSpec) -> None:
        """Create the collection for ``spec`` (it does not exist yet)."""

    @abstractmethod
    def _write_spec(self, spec: CollectionSpec) -> None:
        """Replace the stored metadata of an existing collection (``spec`` is already checked)."""

    @abstractmethod
    def _upsert(self, spec: CollectionSpec, records: Sequence[ChunkRecord]) -> None:
        """Write checked, non-empty ``records``."""

    @abstractmethod
    def _delete(self, ids: list[str]) -> None:
        """Remove the (distinct, non-empty) ``ids``."""

    @abstractmethod
    def _search(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Dense search with a ``[D]`` float32 query of the collection's size."""

    @abstractmethod
    def _search_multivector(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """MaxSim search with a non-empty ``[T, D]`` float32 query of the right size."""

    @abstractmethod
    def _search_sparse(
        self, spec: CollectionSpec, query: SparseVector, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Sparse search in a collection with a sparse field, with a query holding terms."""

    def _search_hybrid(self, spec: CollectionSpec, query: HybridQuery) -> list[StoreHit]:
        """A rule of :attr:`native_fusions`, fused in the database (only called for those)."""
        raise NotImplementedError(f"{self.name} lists {query.fusion!r} as native but does not fuse it")

    @abstractmethod
    def _fetch_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors of the (distinct, non-empty) ``ids`` that exist."""

    @abstractmethod
    def _fetch_sparse(self, ids: list[str]) -> dict[str, SparseVector]:
        """Stored sparse vectors of the (distinct, non-empty) ``ids`` that exist."""


def _without_password(location: str) -> str:
    """``location`` as messages and logs show it: a URL's password (``http://user:token@host``,
    how pymilvus also takes credentials) as ``***``."""
    parts = urlsplit(location)
    if parts.password is None:
        return location
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _check_record_vector(spec: CollectionSpec, record: ChunkRecord) -> None:
    """Refuse a record whose vector has another shape than the collection's, naming the chunk, before
    any of its batch is encoded or written: otherwise a uint8 batch fails in numpy's broadcasting and
    Qdrant's clients raise a bare ``Exception``, naming neither the chunk nor the cause (another model
    or another Matryoshka size than the collection was made with)."""
    vector = np.asarray(record.vector)
    ndim = 2 if spec.layout == "multivector" else 1
    if vector.ndim != ndim or vector.shape[-1] != spec.dimension or vector.size == 0:
        shape = "[tokens, dim]" if ndim == 2 else "[dim]"
        raise InvalidInputError(
            f"chunk {record.id!r}: collection {spec.name!r} holds {shape} vectors of size "
            f"{spec.dimension}, got shape {vector.shape}"
        )
