"""What the Qdrant store and the Qdrant Edge store share: the shape of a Qdrant collection's points,
and the searches over them.

qdrant-client and qdrant-edge-py spell the same engine's classes differently, so this module holds
the layout rules once (which named vectors a collection has, how a record becomes a point's vector,
how a checked filter becomes ``must``/``should`` conditions, how stored vectors come back) and takes
the library's own constructors as arguments; :class:`QdrantPointStore` runs every search and read
through a few hooks each store writes in its library's terms. Neither client is imported here.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import ChunkRecord, CollectionSpec, HybridFusion, PayloadPages, SourcePages, StoreHit
from poolrag.stores.filters import CheckedFilter, Scalar
from poolrag.stores.hybrid import RRF_K
from poolrag.stores.template import HybridQuery, StoreTemplate
from poolrag.stores.vector_types import VECTOR_TYPES

#: The named vectors of a collection with a sparse or token-vector field; one without keeps the
#: unnamed vector it always had.
DENSE_NAME = "dense"
SPARSE_NAME = "sparse"
MULTIVECTOR_NAME = "colbert"
#: How many points one scroll / retrieve / delete call handles.
PAGE = 1000
#: An int8-quantized collection searches its codes this many times deeper, then rescores.
INT8_OVERSAMPLING = 2.0
#: A binary one keeps one bit a dimension, so narrow vectors need a deeper first stage:
#: ``BINARY_BITS / dimension`` times, between 2 and 16 (benchmarks/index_quantization.py: at
#: 384 dimensions 2× held 79-88% of the exact top 10 on real FAQ sets, 16× 98.7-100%).
BINARY_BITS = 6144
MAX_OVERSAMPLING = 16.0


def oversampling(spec: CollectionSpec) -> float:
    """How many times deeper a quantized collection's codes are searched before the rescore."""
    if spec.quantization == "binary":
        return min(MAX_OVERSAMPLING, max(INT8_OVERSAMPLING, BINARY_BITS / spec.dimension))
    return INT8_OVERSAMPLING


class DenseStorage(NamedTuple):
    """A library's own constants for a dense field: its datatypes and distances."""

    float16: Any
    uint8: Any
    cosine: Any
    dot: Any


def vector_fields(
    spec: CollectionSpec,
    *,
    vector_params: Callable[..., Any],
    maxsim: Any,
    storage: DenseStorage,
    sparse_params: Callable[..., Any],
    idf: Any,
) -> tuple[Any, dict[str, Any] | None]:
    """The (vectors, sparse vectors) config of a new collection, in the library's own classes:
    ``vector_params`` and ``sparse_params`` (its parameter classes), ``maxsim`` (its MaxSim
    multivector config), ``storage`` and ``idf`` (its IDF modifier). Token vectors (always float32)
    and compact ones (float16, uint8) are compared by dot product, since under cosine Qdrant would
    renormalise what it is sent: MaxSim is of the token vectors as sent, as the other stores and
    ``Engine.score`` compute it, and a compact field would not hold the values sent (the engine's
    vectors are unit length and the store template normalises the query: still cosines)."""

    def dense(size: int, multivector: bool, vector_type: str) -> Any:
        datatype = {"float16": storage.float16, "uint8": storage.uint8}.get(vector_type)
        distance = storage.dot if multivector or vector_type != "float32" else storage.cosine
        config = maxsim if multivector else None
        return vector_params(size=size, distance=distance, multivector_config=config, datatype=datatype)

    vectors = dense(spec.dimension, spec.layout == "multivector", spec.vector_type)
    if not spec.named_fields:
        return vectors, None
    named = {DENSE_NAME: vectors}
    if spec.multivector_dimension is not None:
        named[MULTIVECTOR_NAME] = dense(spec.multivector_dimension, True, "float32")
    if spec.sparse is None:
        return named, None
    return named, {SPARSE_NAME: sparse_params(modifier=idf if spec.sparse == "bm25" else None)}


def point_vector(spec: CollectionSpec, record: ChunkRecord, sparse: Callable[[SparseVector], Any]) -> Any:
    """A checked (and encoded) record's vector as a point holds it: the plain list, or the named
    vectors. float16 and uint8 values are exact in float32, which is what the clients send."""
    dense = np.asarray(record.vector, dtype=np.float32).tolist()
    if not spec.named_fields:
        return dense
    vector: dict[str, Any] = {DENSE_NAME: dense}
    if record.sparse is not None:
        vector[SPARSE_NAME] = sparse(record.sparse)
    if record.multivector is not None:
        vector[MULTIVECTOR_NAME] = np.asarray(record.multivector, dtype=np.float32).tolist()
    return vector


def payload_filter(
    checked: CheckedFilter | None,
    condition: Callable[[str, Scalar], Any],
    filter_class: Callable[..., Any],
) -> Any:
    """A checked filter as ``Filter(must=[...])``: one condition a key, ``Filter(should=[...])`` for
    a key with several accepted values; ``None`` for no filter."""
    if not checked:
        return None
    must: list[Any] = []
    for key, values in checked.items():
        conditions = [condition(key, v) for v in values]
        must.append(conditions[0] if len(conditions) == 1 else filter_class(should=conditions))
    return filter_class(must=must)


def native_fusion(fusion: HybridFusion, dbsf: Callable[[], Any], rrf: Callable[[int], Any]) -> Any:
    """The fusion query of a rule Qdrant runs itself. Qdrant scores rank r (from 1) as
    ``1 / (r - 1 + k)``: its k = 61 is the textbook k = 60 of the other stores."""
    return dbsf() if fusion == "dbsf" else rrf(RRF_K + 1)


def hits(points: Iterable[Any]) -> list[StoreHit]:
    return [StoreHit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]


def stored_dense(vector: Any) -> np.ndarray:
    """A point's dense (or token) vectors, named or not."""
    if isinstance(vector, dict):
        vector = vector.get(DENSE_NAME, vector.get(""))
    return np.asarray(vector, dtype=np.float32)


def stored_sparse(vector: Any) -> SparseVector:
    """A point's sparse vector (empty when it has none)."""
    stored = vector.get(SPARSE_NAME) if isinstance(vector, dict) else None
    if stored is None:
        return SparseVector.empty()
    return SparseVector.from_dict(dict(zip(stored.indices, stored.values, strict=True)))


class Leg(NamedTuple):
    """One search of one vector field: the query, the field's name (``None``: the unnamed vector) and
    the search parameters."""

    query: Any
    using: str | None
    params: Any = None


class QdrantPointStore(StoreTemplate):
    """The searches and reads both Qdrant stores run alike; each fills in the hooks at the end in
    its library's classes."""

    native_fusions = ("rrf", "dbsf")
    vector_types = VECTOR_TYPES

    def scan_sources(self, consume: SourcePages) -> None:
        self._scan(consume, lambda point: (point.payload or {}).get("source", ""), whole=False)

    def scan_payloads(self, consume: PayloadPages) -> None:
        self._scan(consume, lambda point: dict(point.payload or {}), whole=True)

    def _scan(
        self, consume: Callable[[list[tuple[str, Any]]], None], value: Callable[[Any], Any], whole: bool
    ) -> None:
        """Every point's ``(id, value(point))`` to ``consume``, a scrolled page at a time."""
        offset = None
        while True:
            points, offset = self._scroll(offset, whole)
            consume([(str(p.id), value(p)) for p in points])
            if offset is None or not points:
                return

    def _dense_leg(self, spec: CollectionSpec, query: np.ndarray) -> Leg:
        """The dense (or, in the multivector layout, token) field's search."""
        return Leg(query.tolist(), DENSE_NAME if spec.named_fields else None, self._dense_params(spec))

    def _sparse_leg(self, spec: CollectionSpec, query: SparseVector) -> Leg:
        return Leg(self._sparse_vector(query), SPARSE_NAME, self._sparse_params(spec))

    def _search(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        return self._query(self._dense_leg(spec, query), limit, filter)

    def _search_multivector(
        self, spec: CollectionSpec, query: np.ndarray, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Qdrant applies the filter inside the MaxSim search, so ``limit`` matching chunks come back."""
        if spec.multivector_dimension is not None:  # the field next to the dense one
            return self._query(Leg(query.tolist(), MULTIVECTOR_NAME), limit, filter)
        return self._search(spec, query, limit, filter)

    def _search_sparse(
        self, spec: CollectionSpec, query: SparseVector, limit: int, filter: CheckedFilter | None
    ) -> list[StoreHit]:
        """Inner product with the stored sparse vectors; Qdrant multiplies by IDF in ``bm25`` collections.

        Local mode measures IDF over the live points. A Qdrant server reads it from its sparse index,
        which goes on counting deleted (and overwritten) points until the optimiser vacuums them;
        qdrant-edge is told to count the live points (:meth:`_sparse_params`).
        """
        return self._query(self._sparse_leg(spec, query), limit, filter)

    def _search_hybrid(self, spec: CollectionSpec, query: HybridQuery) -> list[StoreHit]:
        """Plain RRF and DBSF run in Qdrant (two prefetches, the filter in each); min-max and weighted
        RRF are computed from the two legs (Qdrant's weighted RRF divides ranks by the weight)."""
        legs = [self._dense_leg(spec, query.dense), self._sparse_leg(spec, query.sparse)]
        return self._query_fused(legs, query)

    def _fetch_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        return {str(p.id): stored_dense(p.vector) for p in self._retrieve(ids, True)}

    def _fetch_sparse(self, ids: list[str]) -> dict[str, SparseVector]:
        return {str(p.id): stored_sparse(p.vector) for p in self._retrieve(ids, [SPARSE_NAME])}

    # -- hooks: the library's calls --------------------------------------------------------------------
    @abstractmethod
    def _scroll(self, offset: Any, whole: bool) -> tuple[list[Any], Any]:
        """One page of points from ``offset``, and the next page's offset; each point's payload is
        its ``source`` only, or (``whole``) all of it but ``text``."""

    @abstractmethod
    def _query(self, leg: Leg, limit: int, filter: CheckedFilter | None) -> list[StoreHit]:
        """The best ``limit`` points matching ``filter`` by one leg."""

    @abstractmethod
    def _query_fused(self, legs: list[Leg], query: HybridQuery) -> list[StoreHit]:
        """The legs as prefetches ``query.depth`` deep, fused by ``query.fusion``."""

    @abstractmethod
    def _retrieve(self, ids: list[str], vectors: Any) -> list[Any]:
        """The points of ``ids`` with ``vectors`` (``True``: all of them; a list: those named)."""

    @abstractmethod
    def _dense_params(self, spec: CollectionSpec) -> Any:
        """Search parameters of the dense field (rescoring a quantized one)."""

    def _sparse_params(self, spec: CollectionSpec) -> Any:
        """Search parameters of the sparse field: none unless a store needs some."""
        return None

    @abstractmethod
    def _sparse_vector(self, vector: SparseVector) -> Any:
        """``vector`` in the library's class."""
