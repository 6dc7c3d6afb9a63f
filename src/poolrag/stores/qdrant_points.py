"""What the Qdrant store and the Qdrant Edge store share: the shape of a Qdrant collection's points.

qdrant-client and qdrant-edge-py spell the same engine's classes differently, so this module holds
the layout rules once (which named vectors a collection has, how a record becomes a point's vector,
how a checked filter becomes ``must``/``should`` conditions, how stored vectors come back) and takes
the library's own constructors as arguments. Neither client is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import ChunkRecord, CollectionSpec, HybridFusion, StoreHit
from poolrag.stores.filters import CheckedFilter, Scalar
from poolrag.stores.hybrid import RRF_K

#: The named vectors of a collection with a sparse or token-vector field; one without keeps the
#: unnamed vector it always had.
DENSE_NAME = "dense"
SPARSE_NAME = "sparse"
MULTIVECTOR_NAME = "colbert"
#: How many points one scroll / retrieve / delete call handles.
PAGE = 1000
#: Quantized collections search the compressed copy this many times deeper, then rescore.
OVERSAMPLING = 2.0


def vector_fields(
    spec: CollectionSpec,
    vector_params: Callable[[int, bool, str], Any],
    sparse_params: Callable[[bool], Any],
) -> tuple[Any, dict[str, Any] | None]:
    """The (vectors, sparse vectors) config of a new collection. ``vector_params(size, maxsim,
    vector_type)`` and ``sparse_params(idf)`` build the library's parameter objects; token vectors
    are always float32."""
    vectors = vector_params(spec.dimension, spec.layout == "multivector", spec.vector_type)
    if not spec.named_fields:
        return vectors, None
    named = {DENSE_NAME: vectors}
    if spec.multivector_dimension is not None:
        named[MULTIVECTOR_NAME] = vector_params(spec.multivector_dimension, True, "float32")
    sparse = {SPARSE_NAME: sparse_params(spec.sparse == "bm25")} if spec.sparse is not None else None
    return named, sparse


def dense_storage(vector_type: str, float16: Any, uint8: Any, cosine: Any, dot: Any) -> tuple[Any, Any]:
    """(datatype, distance) of a field holding ``vector_type`` vectors, from the library's own
    constants. Compact vectors are compared by dot product: cosine would make Qdrant renormalise
    them on the way in, so it would no longer hold the values sent (the engine's vectors are unit
    length and the store template normalises the query, so the scores are still cosines)."""
    if vector_type == "float32":
        return None, cosine
    return (float16 if vector_type == "float16" else uint8), dot


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


def dense_using(spec: CollectionSpec) -> str | None:
    """The vector name a dense (or, in the multivector layout, token) query searches."""
    return DENSE_NAME if spec.named_fields else None


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


def sources(points: Iterable[Any]) -> dict[str, str]:
    return {str(p.id): (p.payload or {}).get("source", "") for p in points}


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
