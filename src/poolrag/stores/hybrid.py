"""What every store shares for sparse and hybrid search: argument checks, the fusion rule, IDF.

One fusion rule for all stores, so a collection ranks the same in Qdrant, Milvus and memory:
reciprocal-rank fusion with k = 60 over the dense and the sparse ranking, each ``prefetch`` deep.
Qdrant and Milvus fuse plain RRF themselves; a weighted fusion is computed here from both legs,
because neither store's own weighted mode is this rule (Qdrant divides ranks by the weight,
Milvus' ``WeightedRanker`` mixes rescaled scores). The fusion lives in this layer, not in
``poolrag.retrieval.fusion``, because stores sit below retrieval; tests check the two agree.

Deep legs hurt: BM25 hits that share only a common word with the query crowd the sparse list's
tail and outvote the dense ranking. On ``benchmarks/hybrid_dataset.py`` (seed 0, MiniLM + BM25,
10 results; the same in memory, Qdrant and Milvus up to ties) MRR@10 by leg depth was 0.62-0.64
at 5, 0.61-0.62 at 10, 0.55-0.57 at 20, 0.47-0.49 at 100 (dense alone 0.62, recall@10 0.97;
hybrid recall@10 1.00 up to depth 10, 0.73 at 100). So legs default to the number of results
asked for.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import ChunkRecord, CollectionSpec, HybridFusion, StoreHit
from poolrag.stores.errors import UnsupportedStoreFeature

RRF_K = 60


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
    return limit


def prefetch_depth(limit: int, prefetch: int | None) -> int:
    """How deep each leg of a hybrid search goes (default ``limit``; see the module docstring)."""
    check_limit(limit)
    if prefetch is None:
        return limit
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
        raise InvalidInputError(f"prefetch must be a positive integer, got {prefetch!r}")
    return prefetch


def fusion_weights(fusion: HybridFusion) -> tuple[float, float] | None:
    """``None`` for plain RRF, else the (dense, sparse) weights, scaled so 0.5 is plain RRF."""
    if fusion == "rrf":
        return None
    if isinstance(fusion, tuple) and len(fusion) == 2 and fusion[0] == "weighted":
        weight = fusion[1]
        if isinstance(weight, (int, float)) and not isinstance(weight, bool) and 0.0 <= weight <= 1.0:
            return 2.0 * (1.0 - weight), 2.0 * float(weight)
    raise InvalidInputError(f"fusion must be 'rrf' or ('weighted', w) with w in [0, 1], got {fusion!r}")


def fuse_rankings(
    dense: Sequence[StoreHit],
    sparse: Sequence[StoreHit],
    limit: int,
    weights: tuple[float, float] | None = None,
) -> list[StoreHit]:
    """``score(id) = Σ w / (60 + rank)`` over the two rankings; ties keep first appearance."""
    dense_weight, sparse_weight = weights or (1.0, 1.0)
    scores: dict[str, float] = {}
    payloads: dict[str, dict] = {}
    for hits, weight in ((dense, dense_weight), (sparse, sparse_weight)):
        for rank, hit in enumerate(hits, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (RRF_K + rank)
            payloads.setdefault(hit.id, hit.payload)
    best = sorted(scores.items(), key=lambda pair: -pair[1])[:limit]
    return [StoreHit(cid, score, payloads[cid]) for cid, score in best]


def require_sparse(spec: CollectionSpec, where: str) -> CollectionSpec:
    if spec.sparse is None:
        raise UnsupportedStoreFeature(
            f"collection {spec.name!r} in {where} has no sparse field (it was created for dense search); "
            "ingest into a new collection with sparse vectors for sparse or hybrid search"
        )
    return spec


def check_query_sparse(sparse: object) -> SparseVector:
    if not isinstance(sparse, SparseVector):
        raise InvalidInputError(f"a sparse query must be a SparseVector, got {type(sparse).__name__}")
    return sparse


def check_record_fields(spec: CollectionSpec, record: ChunkRecord) -> None:
    """A record holds exactly the collection's fields: a sparse vector where there is a sparse
    field, ``[T, D']`` token vectors where there is a token-vector field, and neither elsewhere."""
    check_record_multivector(spec, record)
    if spec.sparse is not None and not isinstance(record.sparse, SparseVector):
        raise InvalidInputError(
            f"chunk {record.id!r}: collection {spec.name!r} has a {spec.sparse} sparse field, so every "
            "record needs a SparseVector (empty for a chunk without terms)"
        )
    if spec.sparse is None and record.sparse is not None:
        raise UnsupportedStoreFeature(
            f"chunk {record.id!r} has a sparse vector, but collection {spec.name!r} has no sparse field"
        )


def check_record_multivector(spec: CollectionSpec, record: ChunkRecord) -> None:
    size = spec.multivector_dimension
    if size is None:
        if record.multivector is not None:
            raise UnsupportedStoreFeature(
                f"chunk {record.id!r} has token vectors, but collection {spec.name!r} has no "
                "token-vector field"
            )
        return
    tokens = None if record.multivector is None else np.asarray(record.multivector)
    if tokens is None or tokens.ndim != 2 or tokens.shape[1] != size or tokens.shape[0] == 0:
        shape = None if tokens is None else tokens.shape
        raise InvalidInputError(
            f"chunk {record.id!r}: collection {spec.name!r} has a token-vector field of size {size}, "
            f"so every record needs [tokens, {size}] token vectors, got {shape}"
        )


def document_frequencies(vectors: Iterable[SparseVector]) -> tuple[int, dict[int, int]]:
    """How many documents there are and how many hold each term: what IDF needs."""
    count = 0
    frequency: Counter[int] = Counter()
    for vector in vectors:
        count += 1
        frequency.update(vector.indices.tolist())
    return count, dict(frequency)


def idf(document_count: int, frequency: int) -> float:
    """BM25's IDF as Qdrant's ``Modifier.IDF`` and :meth:`poolrag.sparse.BM25Stats.idf` compute it."""
    return math.log(1.0 + (document_count - frequency + 0.5) / (frequency + 0.5))


def with_idf(query: SparseVector, document_count: int, frequency: dict[int, int]) -> SparseVector:
    """The query's weights times each term's IDF in the collection."""
    weights = [w * idf(document_count, frequency.get(t, 0)) for t, w in query.to_dict().items()]
    return SparseVector(query.indices, np.asarray(weights, dtype=np.float64))
