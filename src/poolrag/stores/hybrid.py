"""What every store shares for sparse and hybrid search: argument checks, the fusion rules, IDF.

One set of fusion rules for all stores, so a collection ranks the same in memory, Qdrant, Milvus and
qdrant-edge (up to ties), each leg ``prefetch`` deep and ``filter`` applied in both:

- ``("adaptive", w)``, the default with ``w = 0.4``: each leg's scores min-max normalised per query
  (best hit 1, worst 0) and mixed as ``minmax`` does, but with this query's sparse share moved from
  ``w`` towards the leg whose best hit stands out more from the rest of its own list (the z-score of
  its top score) and scaled by how many of the sparse leg's best hits the dense leg also found
  (:func:`adaptive_weights`). No store computes this, so every store fetches the two legs and fuses
  them here.
- ``("minmax", w)``: the same mix with the fixed share ``(1 - w) * dense + w * sparse``.
- ``"dbsf"``: Qdrant's distribution-based score fusion (each leg's scores mapped by
  ``mean ± 3 * sample std`` to about [0, 1], summed); Qdrant and qdrant-edge run it natively, the
  others compute the same here.
- ``"rrf"``: reciprocal-rank fusion, ``Σ 1 / (60 + rank)``; Qdrant, qdrant-edge and Milvus run it.
- ``("weighted", w)``: RRF with weights ``2 * (1 - w)`` and ``2 * w``, computed here (Qdrant divides
  ranks by the weight instead, Milvus' ``WeightedRanker`` squashes inner products through arctan).

Why this default: it was chosen on real question/answer sets written by people (the Debian FAQ in
English and perlfaq, built by benchmarks/real_datasets.py; the table is in benchmarks/RESULTS.md),
never on the generated benchmarks/hybrid_dataset.py. On real questions, which mostly paraphrase
their answers, BM25 is the weaker leg, and the old default (a fixed 0.6 on sparse) fell 0.05-0.07
MRR@10 below dense alone; a small sparse share lifts dense (rare words and names still count), and
letting the share follow the legs' confidence keeps the hybrid with the better leg when dense is the
one that is lost (the German and French FAQ under an English model), where any small fixed share
stays below BM25; and weighing BM25 down where its best hits are ones the dense leg never found keeps
it from dragging dense down on chit-chat (chatterbot), where BM25 only matches common words. That
last part was found by looking at the German, French and chatterbot sets too (RESULTS.md says so).
A collection declared in a language its model's card does not list gets
:data:`~poolrag.stores.language_prior.OUT_OF_LANGUAGE_FUSION` instead (BM25 leading), from its record
(:func:`~poolrag.stores.language_prior.collection_default_fusion`).
Legs go at least 50 deep (:data:`DEFAULT_PREFETCH`): min-max and the
z-score need enough of each list to tell the best hit from the rest, and 50 beat 30 there.

The fusion lives in this layer, not in ``poolrag.retrieval.fusion``, because stores sit below
retrieval; tests check the RRF here and there agree.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from poolrag.counts import check_count
from poolrag.errors import InvalidInputError
from poolrag.sparse.vector import SparseVector
from poolrag.stores.base import ChunkRecord, CollectionSpec, HybridFusion, StoreHit, VectorStore
from poolrag.stores.errors import UnsupportedStoreFeature
from poolrag.stores.filters import MetadataFilter

RRF_K = 60


def check_limit(limit: object) -> int:
    return check_count(limit, "limit")


def prefetch_depth(limit: int, prefetch: int | None) -> int:
    """How deep each leg of a hybrid search goes (default ``max(limit, DEFAULT_PREFETCH)``; see the
    module docstring)."""
    check_limit(limit)
    if prefetch is None:
        return max(limit, DEFAULT_PREFETCH)
    return check_count(prefetch, "prefetch")


#: The fusion a hybrid search uses unless told otherwise (see the module docstring for why).
DEFAULT_FUSION: HybridFusion = ("adaptive", 0.4)
#: How deep each leg goes at least unless told otherwise (chosen with the fusion).
DEFAULT_PREFETCH = 50


#: The rules that take no parameter, and those written ``(name, w)`` with ``w`` the sparse leg's share.
PLAIN_RULES: tuple[str, ...] = ("rrf", "dbsf")
SHARE_RULES: tuple[str, ...] = ("weighted", "minmax", "adaptive")


def check_fusion(fusion: object) -> HybridFusion:
    """``fusion`` if it is one of the rules, else :class:`InvalidInputError` (before any search runs)."""
    if fusion in PLAIN_RULES:
        return fusion  # type: ignore[return-value]
    if isinstance(fusion, tuple) and len(fusion) == 2 and fusion[0] in SHARE_RULES:
        weight = fusion[1]
        if isinstance(weight, (int, float)) and not isinstance(weight, bool) and 0.0 <= weight <= 1.0:
            return (fusion[0], float(weight))  # type: ignore[return-value]
    raise InvalidInputError(
        "fusion must be 'rrf', 'dbsf', ('weighted', w), ('minmax', w) or ('adaptive', w) with w in [0, 1], "
        f"got {fusion!r}"
    )


def fusion_text(fusion: HybridFusion) -> str:
    """``fusion`` as reports and logs write it: ``rrf``, or ``adaptive 0.4`` (the rule, the sparse share)."""
    return fusion if isinstance(fusion, str) else f"{fusion[0]} {fusion[1]:g}"


def standout(scores: Sequence[float]) -> float:
    """How far a leg's best hit stands out of its own list: ``(best - mean) / std``, at least 0; 0 for
    fewer than three hits or equal scores (nothing to tell a confident leg by)."""
    if len(scores) < 3:
        return 0.0
    mean = sum(scores) / len(scores)
    spread = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    return max((scores[0] - mean) / spread, 0.0) if spread > 0 else 0.0


def adaptive_weights(
    dense: Sequence[StoreHit], sparse: Sequence[StoreHit], prior: float
) -> tuple[float, float]:
    """This query's (dense, sparse) shares, from the two legs (best first) alone.

    The ``prior`` sparse share is moved towards the leg whose best hit stands out more,
    ``w = prior · z_s³ / (prior · z_s³ + (1 - prior) · z_d³)`` (:func:`standout`; the cube lets a
    clearly more confident leg take over, as BM25 does when the dense model does not know the
    language), and then scaled by the legs' agreement: the fraction of the sparse leg's best
    :data:`AGREEMENT_TOP` hits that the dense leg also found. Where BM25 only matches common words
    (chit-chat, paraphrase) its best hits are ones the dense leg never saw, so the share falls
    towards 0 and the hybrid stays at dense. Before the agreement, the prior itself when neither
    leg can tell.
    """
    mine = prior * standout([h.score for h in sparse]) ** 3
    theirs = (1.0 - prior) * standout([h.score for h in dense]) ** 3
    share = (prior if mine + theirs == 0 else mine / (mine + theirs)) * agreement(dense, sparse)
    return 1.0 - share, share


#: How many of the sparse leg's best hits :func:`agreement` looks for in the dense leg.
AGREEMENT_TOP = 15


def agreement(dense: Sequence[StoreHit], sparse: Sequence[StoreHit]) -> float:
    """How many of the sparse leg's best ``AGREEMENT_TOP`` hits are anywhere in the dense leg, over
    ``AGREEMENT_TOP`` (a sparse leg shorter than that, a query with few matching words, counts less)."""
    found = {h.id for h in dense}
    return sum(1 for h in sparse[:AGREEMENT_TOP] if h.id in found) / AGREEMENT_TOP


def fuse_legs(
    dense: Sequence[StoreHit], sparse: Sequence[StoreHit], limit: int, fusion: HybridFusion
) -> list[StoreHit]:
    """The two legs (best first, ``prefetch`` deep) fused by ``fusion``; ties keep first appearance,
    dense before sparse."""
    fusion = check_fusion(fusion)
    if fusion == "dbsf":
        return fuse_scores(dense, sparse, limit, dbsf_normalised, (1.0, 1.0))
    if isinstance(fusion, str):  # rrf
        return fuse_rankings(dense, sparse, limit)
    rule, share = fusion
    if rule == "minmax":
        return fuse_scores(dense, sparse, limit, min_max_normalised, (1.0 - share, share))
    if rule == "adaptive":
        return fuse_scores(dense, sparse, limit, min_max_normalised, adaptive_weights(dense, sparse, share))
    # weighted: RRF's weights scaled so a share of 0.5 is plain RRF
    return fuse_rankings(dense, sparse, limit, (2.0 * (1.0 - share), 2.0 * share))


def local_fusion(
    store: VectorStore,
    dense: np.ndarray,
    sparse: SparseVector | None,
    limit: int,
    depth: int,
    filter: MetadataFilter | None,
    fusion: HybridFusion,
) -> list[StoreHit]:
    """``store``'s two legs, ``depth`` deep, fused here by :func:`fuse_legs`: the path of every rule a
    store does not run itself. ``sparse`` is ``None`` when the query has no terms (no sparse leg)."""
    dense_hits = store.search(dense, depth, filter)
    sparse_hits = [] if sparse is None else store.search_sparse(sparse, depth, filter)
    return fuse_legs(dense_hits, sparse_hits, limit, fusion)


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


def min_max_normalised(scores: Sequence[float]) -> list[float]:
    """Best 1, worst 0; a leg whose scores are all equal (or one hit) scores 1 throughout."""
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def dbsf_normalised(scores: Sequence[float]) -> list[float]:
    """Qdrant's DBSF: ``(s - (mean - 3 std)) / (6 std)`` with the sample std; 0.5 for one hit or
    equal scores (as Qdrant does, so the stores that fuse natively and the rest agree)."""
    if len(scores) == 1:
        return [0.5]
    mean = sum(scores) / len(scores)
    variance = sum((s - mean) ** 2 for s in scores) / (len(scores) - 1)
    if variance == 0:
        return [0.5] * len(scores)
    spread = 6.0 * math.sqrt(variance)
    return [(s - mean) / spread + 0.5 for s in scores]


def fuse_scores(
    dense: Sequence[StoreHit],
    sparse: Sequence[StoreHit],
    limit: int,
    normalise: Callable[[Sequence[float]], list[float]],
    weights: tuple[float, float],
) -> list[StoreHit]:
    """``score(id) = Σ weight * normalise(leg scores)[id]`` over the legs that hold ``id``."""
    scores: dict[str, float] = {}
    payloads: dict[str, dict] = {}
    for hits, weight in ((dense, weights[0]), (sparse, weights[1])):
        if not hits:
            continue
        for hit, value in zip(hits, normalise([h.score for h in hits]), strict=True):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight * value
            payloads.setdefault(hit.id, hit.payload)
    best = sorted(scores.items(), key=lambda pair: -pair[1])[:limit]
    return [StoreHit(cid, score, payloads[cid]) for cid, score in best]


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
