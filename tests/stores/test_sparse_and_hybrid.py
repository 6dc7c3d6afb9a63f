"""Sparse and hybrid search in Milvus Lite, Qdrant local mode, Qdrant Edge and the in-process store.

Documents hold BM25's term-frequency half (from the MiniLM tokenizer); queries carry unit weights
and every store supplies IDF (Qdrant's and the edge shard's ``Modifier.IDF``, Milvus from the
statistics it keeps, the in-process store from its vectors). Sparse scores are checked against
BM25 computed by hand, hybrid results against each fusion rule (min-max score mix, Qdrant's DBSF,
reciprocal-rank fusion) computed by hand from the two legs, and the stores against each other.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from pathlib import Path

import numpy as np
import pytest
from topic_corpus import CORPUS, TOPICS

from poolrag.errors import InvalidInputError
from poolrag.sparse import BM25Encoder, BM25Stats, SparseVector
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores import ChunkRecord, CollectionMismatchError, CollectionSpec, StoreHit
from poolrag.stores.errors import UnsupportedStoreFeature
from poolrag.stores.hybrid import (
    DEFAULT_FUSION,
    adaptive_weights,
    agreement,
    fuse_legs,
    fuse_rankings,
    standout,
)
from poolrag.stores.language_prior import LANGUAGES_RECORD_KEY, OUT_OF_LANGUAGE_FUSION, LanguageRecord

MODEL = "minilm@2cbc4fe1b1001d07"
KINDS = ["memory", "qdrant", "milvus", "qdrant-edge", "process"]  # process: tests/stores/process_store.py
QUERIES = ["boiler pump XK-4471", "why does the bread rise", "waggle dance Okonkwo", "the moon and the tides"]


def chunk_id(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"hybrid-{i}"))


@pytest.fixture(scope="module")
def encoder(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def corpus(minilm_engine, encoder: BM25Encoder):
    """Dense vectors, term counts and BM25 document vectors of CORPUS."""
    dense = minilm_engine.embed_array(CORPUS)
    counts = encoder.term_counts(CORPUS)
    sparse = encoder.document_vectors(counts, BM25Stats.from_term_counts(counts).avg_doc_length)
    return dense, counts, sparse


def spec(sparse: str | None = "bm25") -> CollectionSpec:
    return CollectionSpec(
        name="docs",
        dimension=384,
        model_identity=MODEL,
        full_dimension=384,
        model_name="minilm",
        sparse=sparse,  # type: ignore[arg-type]
    )


def payload(i: int) -> dict[str, str | int]:
    return {"text": CORPUS[i], "source": f"{i}.md", "topic": TOPICS[i], "shelf": i % 3}


def records(corpus, which=None) -> list[ChunkRecord]:
    dense, _, sparse = corpus
    which = range(len(CORPUS)) if which is None else which
    return [ChunkRecord(chunk_id(i), dense[i], payload(i), sparse[i]) for i in which]


def hand_bm25(query_terms: set[int], doc: SparseVector, alive: list[dict[int, int]]) -> float:
    """IDF over the chunks still stored times each document's stored term-frequency weight."""
    n = len(alive)
    weights = doc.to_dict()
    score = 0.0
    for term in query_terms & weights.keys():
        df = sum(term in counts for counts in alive)
        score += math.log(1 + (n - df + 0.5) / (df + 0.5)) * weights[term]
    return score


def check_sparse_scores(store, encoder: BM25Encoder, corpus, alive: list[int], termless: int = 0) -> None:
    """Every query's sparse hits are BM25 over the ``alive`` chunks of the corpus plus ``termless``
    stored chunks without terms (they count as documents, and match nothing)."""
    _, counts, sparse = corpus
    for text, query in zip(QUERIES, encoder.encode_queries(QUERIES), strict=True):
        terms = set(query.indices.tolist())
        hits = store.search_sparse(query, len(CORPUS))
        expected = {
            chunk_id(i): hand_bm25(terms, sparse[i], [counts[j] for j in alive] + [{}] * termless)
            for i in alive
            if terms & counts[i].keys()
        }
        assert {h.id for h in hits} == set(expected), text
        for hit in hits:
            assert hit.score == pytest.approx(expected[hit.id], rel=1e-4), text
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("kind", KINDS)
def test_sparse_search_is_bm25_and_survives_reupsert_and_delete(kind, make_store, encoder, corpus) -> None:
    store = make_store(kind)
    store.ensure_collection(spec())
    store.upsert(records(corpus))
    counts = corpus[1]
    # The first hand check on the full corpus is BM25 itself (avgdl and IDF of these documents).
    query = encoder.encode_queries(["boiler pump"])[0]
    stats = BM25Stats.from_term_counts(counts)
    expected_full = encoder.encode_queries(["boiler pump"], stats)[0].dot(corpus[2][1])
    assert store.search_sparse(query, 1)[0].score == pytest.approx(expected_full, rel=1e-4)
    check_sparse_scores(store, encoder, corpus, list(range(len(CORPUS))))
    store.upsert(records(corpus))  # the same chunks again: nothing counted twice
    store.upsert(records(corpus, [3, 3, 4]))  # an id twice in one batch, too
    assert store.count() == len(CORPUS)
    check_sparse_scores(store, encoder, corpus, list(range(len(CORPUS))))
    stored = store.fetch_sparse([chunk_id(3), chunk_id(4), chunk_id(77)])  # 77: never stored
    assert set(stored) == {chunk_id(3), chunk_id(4)}
    for i in (3, 4):
        np.testing.assert_array_equal(stored[chunk_id(i)].indices, corpus[2][i].indices)
        np.testing.assert_allclose(stored[chunk_id(i)].values, corpus[2][i].values, rtol=1e-6)
    store.delete([chunk_id(0), chunk_id(5), chunk_id(5)])
    alive = [i for i in range(len(CORPUS)) if i not in (0, 5)]
    check_sparse_scores(store, encoder, corpus, alive)
    filtered = store.search_sparse(encoder.encode_queries(["the pump"])[0], 10, {"topic": "heating"})
    assert {h.id for h in filtered} == {chunk_id(1), chunk_id(9)} and all(
        h.payload["topic"] == "heating" for h in filtered
    )
    assert store.search_sparse(SparseVector.empty(), 5) == []


def test_milvus_keeps_exact_statistics_and_recounts_stale_ones(make_store, encoder, corpus, tmp_path) -> None:
    store = make_store("milvus")
    store.ensure_collection(spec())
    store.upsert(records(corpus))
    store.upsert(records(corpus, [1, 2]))
    store.delete([chunk_id(2)])
    alive_ids = [i for i in range(len(CORPUS)) if i != 2]
    alive = [corpus[1][i] for i in alive_ids]
    by_hand = BM25Stats.from_term_counts(alive)
    # Milvus has no IDF of its own: the store's statistics are what weight each query term.
    check_sparse_scores(store, encoder, corpus, alive_ids)
    store.close()
    reopened = make_store("milvus")
    check_sparse_scores(reopened, encoder, corpus, alive_ids)
    # A write that died half-way leaves the statistics marked stale: the next reader counts again.
    reopened._client.alter_collection_properties("docs", {"poolrag_bm25": "stale"})
    check_sparse_scores(reopened, encoder, corpus, alive_ids)
    recounted = BM25Stats.from_json(
        reopened._client.describe_collection("docs")["properties"]["poolrag_bm25"]
    )
    assert (recounted.document_count, recounted.document_frequency) == (
        by_hand.document_count,
        by_hand.document_frequency,
    )
    # A chunk without terms is stored (Milvus refuses all-zero rows), counted, and never matched.
    empty = ChunkRecord(chunk_id(99), corpus[0][0], {"text": "...", "source": "e.md"}, SparseVector.empty())
    reopened.upsert([empty])
    check_sparse_scores(reopened, encoder, corpus, alive_ids, termless=1)
    assert reopened.fetch_sparse([chunk_id(99)]) == {chunk_id(99): SparseVector.empty()}
    assert chunk_id(99) not in {h.id for h in reopened.search_sparse(encoder.encode_queries(["the"])[0], 20)}


def by_hand_rrf(dense: list[StoreHit], sparse: list[StoreHit], weights=(1.0, 1.0)) -> dict[str, float]:
    """``Σ weight / (60 + rank)`` over the legs an id is in, in first-appearance order (dense first)."""
    fused: dict[str, float] = {}
    for hits, weight in zip((dense, sparse), weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + weight / (60 + rank)
    return fused


def by_hand_scores(dense: list[StoreHit], sparse: list[StoreHit], rule: str, w: float = 0.5):
    """Min-max: each leg mapped to [0, 1] (all equal: 1), mixed ``(1 - w) * dense + w * sparse``.
    DBSF: each leg mapped by mean ± 3 sample std (one hit or equal scores: 0.5), summed."""
    fused: dict[str, float] = {}
    for hits, weight in ((dense, 1 - w), (sparse, w)):
        scores = np.array([h.score for h in hits], dtype=np.float64)
        if not len(scores):
            continue
        if rule == "minmax":
            span = scores.max() - scores.min()
            normalised = (scores - scores.min()) / span if span else np.ones_like(scores)
        else:
            weight = 1.0
            std = scores.std(ddof=1) if len(scores) > 1 else 0.0
            normalised = (scores - scores.mean() + 3 * std) / (6 * std) if std else np.full_like(scores, 0.5)
        for hit, value in zip(hits, normalised, strict=True):
            fused[hit.id] = fused.get(hit.id, 0.0) + weight * float(value)
    return fused


def by_hand_adaptive(dense: list[StoreHit], sparse: list[StoreHit], prior: float = 0.4):
    """The default: min-max mixing with the sparse share moved from ``prior`` by how far each leg's
    best score stands out of its list (z-score with the population std, at least 0; 0 below 3 hits;
    cubed), times the fraction of the sparse leg's best 15 hits that the dense leg also holds."""

    def standout(hits: list[StoreHit]) -> float:
        scores = np.array([h.score for h in hits], dtype=np.float64)
        if len(scores) < 3 or scores.std() == 0:
            return 0.0
        return max((scores[0] - scores.mean()) / scores.std(), 0.0)

    mine, theirs = prior * standout(sparse) ** 3, (1 - prior) * standout(dense) ** 3
    share = prior if mine + theirs == 0 else mine / (mine + theirs)
    shared = len({h.id for h in sparse[:15]} & {h.id for h in dense}) / 15
    return by_hand_scores(dense, sparse, "minmax", share * shared)


def check_fused(hits: list[StoreHit], expected: dict[str, float], limit: int) -> None:
    """Same ids and scores as the hand fusion's best ``limit``, up to the order of tied scores."""
    assert len(hits) == min(limit, len(expected))
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.id], rel=1e-5)
    cut = sorted(expected.values(), reverse=True)[len(hits) - 1]
    assert {i for i, s in expected.items() if s > cut + 1e-9} <= {h.id for h in hits}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("kind", KINDS)
def test_hybrid_fuses_the_two_legs_by_each_rule_with_filters_on_both(
    kind, make_store, encoder, corpus, minilm_engine
):
    store = make_store(kind)
    store.ensure_collection(spec())
    store.upsert(records(corpus))
    dense_queries = minilm_engine.embed_array(QUERIES)
    sparse_queries = encoder.encode_queries(QUERIES)
    for dense, sparse in zip(dense_queries, sparse_queries, strict=True):
        # Strings filter inside Milvus' search; integers go through its exact id pre-selection.
        for filter in (None, {"topic": ["heating", "bees"]}, {"shelf": [0, 2]}):
            legs = store.search(dense, 3, filter), store.search_sparse(sparse, 3, filter)
            hits = store.search_hybrid(dense, sparse, 4, filter=filter, prefetch=3)  # the default
            check_fused(hits, by_hand_adaptive(*legs), 4)
            for key, allowed in (filter or {}).items():
                assert hits and all(h.payload[key] in allowed for h in legs[0] + legs[1] + hits)
            for fusion, expected in (
                ("rrf", by_hand_rrf(*legs)),
                (("weighted", 0.8), by_hand_rrf(*legs, weights=(0.4, 1.6))),
                ("dbsf", by_hand_scores(*legs, "dbsf")),
                (("minmax", 0.25), by_hand_scores(*legs, "minmax", 0.25)),
            ):
                fused = store.search_hybrid(dense, sparse, 4, filter=filter, prefetch=3, fusion=fusion)
                check_fused(fused, expected, 4)
        default = store.search_hybrid(dense, sparse, 2)  # legs 50 deep: the whole small corpus
        legs = store.search(dense, 50), store.search_sparse(sparse, 50)
        check_fused(default, by_hand_adaptive(*legs), 2)
        assert default[0].payload["text"] in CORPUS
    # A query without terms fuses the dense leg alone, by every rule.
    dense_leg = store.search(dense_queries[0], 3)
    for fusion in (DEFAULT_FUSION, "dbsf", "rrf"):
        only_dense = store.search_hybrid(dense_queries[0], SparseVector.empty(), 3, fusion=fusion)
        assert [h.id for h in only_dense] == [h.id for h in dense_leg], fusion
    for bad in (("weighted", 2.0), ("minmax", -0.1), "max", ("dbsf", 0.5)):
        with pytest.raises(InvalidInputError, match="fusion"):
            store.search_hybrid(dense_queries[0], sparse_queries[0], 3, fusion=bad)


def test_every_store_fuses_to_the_same_ranking(make_store, encoder, corpus, minilm_engine) -> None:
    stores = {kind: make_store(kind) for kind in KINDS}
    for store in stores.values():
        store.ensure_collection(spec())
        store.upsert(records(corpus))
    queries = list(zip(minilm_engine.embed_array(QUERIES), encoder.encode_queries(QUERIES), strict=True))
    for fusion in (DEFAULT_FUSION, "dbsf", "rrf", ("weighted", 0.8)):
        for dense, sparse in queries:
            rankings = {
                kind: store.search_hybrid(
                    dense, sparse, 5, filter={"topic": ["heating", "sea", "bread"]}, fusion=fusion
                )
                for kind, store in stores.items()
            }
            reference = rankings["memory"]
            for kind in KINDS[1:]:
                got = rankings[kind]
                # The same fused scores, and the same ids wherever no tie straddles the cut.
                assert [h.score for h in got] == pytest.approx([h.score for h in reference], abs=1e-5)
                cut = reference[-1].score
                above = {h.id for h in reference if h.score > cut + 1e-5}
                assert above <= {h.id for h in got}, (kind, fusion)
                # Each id scores the same in both, so the orders differ only among equal scores.
                scores = {h.id: h.score for h in reference}
                for hit in got:
                    assert hit.id not in scores or hit.score == pytest.approx(scores[hit.id], abs=1e-5)


def test_rank_fusion_is_the_hand_computed_sum_with_ties_in_first_appearance_order() -> None:
    dense = [StoreHit(f"d{i}", 1.0 - i / 10, {}) for i in range(5)]
    sparse = [StoreHit(i, 3.0, {}) for i in ("d3", "x", "d0", "y")]
    assert by_hand_rrf(dense, sparse)["d0"] == pytest.approx(1 / 61 + 1 / 63)  # dense rank 1, sparse rank 3
    for weights, rule in ((None, "rrf"), ((0.4, 1.6), ("weighted", 0.8))):
        by_hand = by_hand_rrf(dense, sparse, weights or (1.0, 1.0))
        expected = sorted(by_hand.items(), key=lambda pair: -pair[1])
        fused = fuse_rankings(dense, sparse, 10, weights)
        assert [(h.id, pytest.approx(h.score)) for h in fused] == expected
        via_rule = fuse_legs(dense, sparse, 10, rule)
        assert [(h.id, pytest.approx(h.score)) for h in via_rule] == expected
    # "b" and "q" both sit at rank 2 of one leg, "a" and "p" at rank 1: the dense leg's come first.
    dense_leg, sparse_leg = (
        [StoreHit("a", 0.9, {}), StoreHit("b", 0.8, {})],
        [StoreHit("p", 7.0, {}), StoreHit("q", 5.0, {})],
    )
    tied = fuse_legs(dense_leg, sparse_leg, 4, "rrf")
    assert [h.id for h in tied] == ["a", "p", "b", "q"]


def test_score_fusion_picks_the_confident_leg() -> None:
    """Why scores, not ranks: a sparse leg with one clear winner beats a flat dense leg under the
    score rules, where RRF ranks the dense leg's first hit first."""
    ids = ["d0", "d1", "d4", "d2", "d3", *(f"d{i}" for i in range(5, 15))]
    dense = [StoreHit(i, 0.500 - n / 1000, {}) for n, i in enumerate(ids)]
    sparse = [StoreHit("d4", 9.0, {}), StoreHit("d0", 1.03, {})]  # the legs agree (see below)
    sparse += [StoreHit(f"d{i}", 1.0 + i / 1000, {}) for i in (14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 3, 2, 1)]
    assert fuse_legs(dense, sparse, 1, "rrf")[0].id == "d0"
    for fusion in (DEFAULT_FUSION, "dbsf", ("minmax", 0.5)):
        best = fuse_legs(dense, sparse, 3, fusion)
        assert best[0].id == "d4", fusion
        expected = (
            by_hand_adaptive(dense, sparse)
            if fusion == DEFAULT_FUSION
            else by_hand_scores(dense, sparse, *_rule(fusion))
        )
        assert best[0].score == pytest.approx(expected["d4"])
    # One hit or equal scores: min-max gives that leg 1, DBSF 0.5, as Qdrant does.
    one = [StoreHit("a", 0.3, {})]
    assert fuse_legs(one, [], 1, ("minmax", 0.6))[0].score == pytest.approx(0.4)
    assert fuse_legs(one, [], 1, "dbsf")[0].score == pytest.approx(0.5)


def test_adaptive_fusion_moves_the_share_towards_the_leg_that_stands_out() -> None:
    """The default's share follows the legs' confidence: a sparse leg whose best hit stands far out
    gets more than the prior 0.4, a flat one less, and two legs that cannot tell keep the prior
    (when they agree on every hit)."""
    flat = [StoreHit(f"f{i}", 0.5 - i / 1e6, {}) for i in range(15)]
    peaked = [StoreHit(f"f{i}", 9.0 if i == 0 else 1.0, {}) for i in range(15)]  # the same hits
    assert adaptive_weights(flat, peaked, 0.4)[1] > 0.4
    assert adaptive_weights(peaked, flat, 0.4)[1] < 0.4
    equal = [StoreHit(f"f{i}", 1.0, {}) for i in range(15)]
    assert adaptive_weights(equal, equal, 0.4) == pytest.approx((0.6, 0.4))
    assert standout([3.0, 1.0, 1.0, 1.0]) == pytest.approx((3.0 - 1.5) / np.std([3.0, 1.0, 1.0, 1.0]))
    assert fuse_legs(flat, peaked, 1, DEFAULT_FUSION)[0].id == "f0"
    with pytest.raises(InvalidInputError, match="adaptive"):
        fuse_legs(flat, peaked, 1, ("adaptive", 1.5))


def test_adaptive_fusion_trusts_the_sparse_leg_only_as_far_as_the_dense_leg_agrees() -> None:
    """Chit-chat: BM25's best hits match common words, hits the dense leg never found. Their share
    falls with the fraction of the sparse leg's best 15 that the dense leg holds, to 0 when none,
    so a confident-looking but unrelated sparse leg cannot pull the hybrid below dense."""
    dense = [StoreHit(f"d{i}", 0.9 - i / 100, {}) for i in range(20)]
    stranger = [StoreHit("s0", 9.0, {})] + [StoreHit(f"s{i}", 1.0, {}) for i in range(1, 20)]
    assert agreement(dense, stranger) == 0.0
    assert adaptive_weights(dense, stranger, 0.4) == pytest.approx((1.0, 0.0))
    assert [h.id for h in fuse_legs(dense, stranger, 3, DEFAULT_FUSION)] == ["d0", "d1", "d2"]
    # Five of its best 15 in the dense leg: a third of the confidence-moved share.
    partly = [StoreHit("d5", 9.0, {})] + [
        StoreHit(f"d{i}" if i < 5 else f"s{i}", 1.0, {}) for i in range(1, 20)
    ]
    assert agreement(dense, partly) == pytest.approx(5 / 15)
    full = adaptive_weights(dense, [StoreHit(f"d{i}", h.score, {}) for i, h in enumerate(partly)], 0.4)[1]
    assert adaptive_weights(dense, partly, 0.4)[1] == pytest.approx(full * 5 / 15)
    assert agreement(dense, []) == 0.0 and adaptive_weights(dense, [], 0.4) == pytest.approx((1.0, 0.0))


def _rule(fusion) -> tuple[str, float]:
    return ("dbsf", 0.5) if fusion == "dbsf" else ("minmax", fusion[1])


@pytest.mark.parametrize("kind", KINDS)
def test_dense_only_collections_refuse_sparse_and_hybrid_is_checked(kind, make_store, corpus) -> None:
    store = make_store(kind)
    store.ensure_collection(spec(None))
    with pytest.raises(UnsupportedStoreFeature, match="sparse"):
        store.upsert(records(corpus))  # sparse vectors for a collection without a sparse field
    store.upsert([ChunkRecord(r.id, r.vector, r.payload) for r in records(corpus)])
    assert store.search(corpus[0][4], 1)[0].id == chunk_id(4)
    with pytest.raises(UnsupportedStoreFeature, match="no sparse field"):
        store.search_sparse(corpus[2][0], 3)
    with pytest.raises(UnsupportedStoreFeature, match="no sparse field"):
        store.search_hybrid(corpus[0][0], corpus[2][0], 3)
    with pytest.raises(CollectionMismatchError, match="sparse field none vs bm25"):
        store.ensure_collection(spec("bm25"))
    hybrid = make_store(kind, "hybrid")
    hybrid.ensure_collection(spec("bm25"))
    with pytest.raises(InvalidInputError, match="needs a SparseVector"):
        hybrid.upsert([ChunkRecord(chunk_id(0), corpus[0][0], {"text": "x"})])


def test_collections_written_before_sparse_support_still_work(tmp_path: Path, make_store, corpus) -> None:
    """Metadata without a ``sparse`` key and Qdrant's unnamed vector, as poolrag wrote them before."""
    from pymilvus import DataType, MilvusClient
    from qdrant_client import QdrantClient, models

    old = {
        "dimension": 384,
        "full_dimension": 384,
        "layout": "dense",
        "metric": "cosine",
        "model_identity": MODEL,
        "model_name": "minilm",
        "model_options": {},
        "quantization": None,
    }
    assert CollectionSpec.from_metadata("docs", json.dumps(old)).sparse is None
    dense = corpus[0]
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    client.create_collection(
        "docs",
        vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE),
        metadata={"poolrag": json.dumps(old)},
    )
    client.upsert(
        "docs",
        [
            models.PointStruct(id=chunk_id(i), vector=dense[i].tolist(), payload={"text": t})
            for i, t in enumerate(CORPUS)
        ],
    )
    client.close()
    milvus = MilvusClient(uri=str(tmp_path / "milvus.db"))
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=384)
    schema.add_field("source", DataType.VARCHAR, max_length=4096)
    index = milvus.prepare_index_params()
    index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
    properties = {"poolrag": json.dumps(old)}
    milvus.create_collection("docs", schema=schema, index_params=index, properties=properties)
    milvus.insert(
        "docs",
        [
            {"id": chunk_id(i), "vector": dense[i].tolist(), "source": "", "text": t}
            for i, t in enumerate(CORPUS)
        ],
    )
    milvus.close()
    for kind in ("qdrant", "milvus"):
        store = make_store(kind)
        assert store.read_spec().sparse is None
        assert store.ensure_collection(spec(None)).sparse is None
        hit = store.search(dense[7], 1)[0]
        assert (hit.id, hit.payload["text"]) == (chunk_id(7), CORPUS[7])
        np.testing.assert_allclose(store.fetch_vectors([chunk_id(7)])[chunk_id(7)], dense[7], atol=1e-6)
        store.upsert([ChunkRecord(chunk_id(20), dense[3], {"text": "new", "source": "n.md"})])
        assert store.count() == len(CORPUS) + 1


@pytest.mark.parametrize("kind", KINDS)
def test_learned_sparse_weights_are_searched_by_plain_inner_product(kind, make_store, corpus) -> None:
    """SPLADE-style weights carry their own importance: no store multiplies them by IDF."""
    rng = np.random.default_rng(3)
    terms = [rng.choice(40, 6, replace=False) for _ in CORPUS]
    weights = [SparseVector.from_dict({int(t): float(rng.uniform(0.1, 2.0)) for t in ts}) for ts in terms]
    store = make_store(kind)
    store.ensure_collection(spec("learned"))
    dense = corpus[0]
    store.upsert([ChunkRecord(chunk_id(i), dense[i], payload(i), weights[i]) for i in range(len(CORPUS))])
    query = SparseVector.from_dict({3: 0.5, 7: 1.5, 11: 1.0, 39: 0.25})
    hits = store.search_sparse(query, len(CORPUS))
    expected = {chunk_id(i): query.dot(w) for i, w in enumerate(weights) if set(w.indices) & {3, 7, 11, 39}}
    assert {h.id: pytest.approx(h.score, rel=1e-5) for h in hits} == expected
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("kind", ["memory", "qdrant", "qdrant-edge"])
def test_dense_sparse_and_token_vectors_in_one_collection(kind, make_store, encoder, corpus, minilm_engine):
    """BGE-M3's three heads side by side: dense, sparse and ColBERT token vectors, each searchable."""
    outputs = minilm_engine.encode(CORPUS, pooling_task="token_embed")
    tokens = [np.asarray(o.outputs.data, dtype=np.float32) for o in outputs]
    tokens = [t / np.linalg.norm(t, axis=1, keepdims=True) for t in tokens]
    three = CollectionSpec(**{**spec().__dict__, "multivector_dimension": 384})
    store = make_store(kind)
    store.ensure_collection(three)
    with pytest.raises(InvalidInputError, match="token vectors"):
        store.upsert(records(corpus)[:1])  # no token vectors for a collection with that field
    full = [
        ChunkRecord(r.id, r.vector, r.payload, r.sparse, t)
        for r, t in zip(records(corpus), tokens, strict=True)
    ]
    store.upsert(full)
    store.upsert(full)  # idempotent
    assert store.count() == len(CORPUS)
    query = tokens[6][:5]  # a few token vectors of the Okonkwo sentence
    for filter in (None, {"topic": ["bees", "sea"]}):
        allowed = [i for i in range(len(CORPUS)) if filter is None or TOPICS[i] in filter["topic"]]
        expected = {chunk_id(i): float((query @ tokens[i].T).max(axis=1).sum()) for i in allowed}
        hits = store.search_multivector(query, 3, filter)
        best = sorted(expected.values(), reverse=True)[:3]
        assert [h.score for h in hits] == pytest.approx(best, rel=1e-4)
        assert hits[0].id == chunk_id(6)
        assert all(h.score == pytest.approx(expected[h.id], rel=1e-4) for h in hits)
    dense_hits = store.search(corpus[0][3], 1)
    assert dense_hits[0].id == chunk_id(3)
    np.testing.assert_allclose(store.fetch_vectors([chunk_id(3)])[chunk_id(3)], corpus[0][3], atol=1e-5)
    sparse = encoder.encode_queries(["waggle dance"])[0]
    assert store.search_sparse(sparse, 1)[0].id in (chunk_id(2), chunk_id(6))
    legs = store.search(corpus[0][2], 50), store.search_sparse(sparse, 50)
    check_fused(store.search_hybrid(corpus[0][2], sparse, 3), by_hand_adaptive(*legs), 3)
    with pytest.raises(CollectionMismatchError, match="token-vector field"):
        store.ensure_collection(spec())


def test_milvus_refuses_token_vectors_next_to_dense(make_store) -> None:
    three = CollectionSpec(**{**spec().__dict__, "multivector_dimension": 384})
    with pytest.raises(UnsupportedStoreFeature, match="qdrant"):
        make_store("milvus").ensure_collection(three)
    with pytest.raises(InvalidInputError, match="multivector_dimension"):
        CollectionSpec(**{**spec().__dict__, "multivector_dimension": 0})


@pytest.mark.parametrize("kind", KINDS)
def test_a_collection_in_a_language_its_model_does_not_cover_fuses_with_bm25_leading(
    kind, make_store, encoder, corpus, minilm_engine
) -> None:
    """``search_hybrid`` without a fusion reads the collection's BM25 record: declared Italian, with a
    model card that says English, it fuses by ``OUT_OF_LANGUAGE_FUSION`` (min-max, BM25's share
    raised), the same in every store; declared English, by ``DEFAULT_FUSION``."""
    for language, fusion in (("italian", OUT_OF_LANGUAGE_FUSION), ("english", DEFAULT_FUSION)):
        languages = LanguageRecord.declared(("en",), language).to_metadata()
        bm25 = {"avg_doc_length": 10.0, "k1": 1.2, "b": 0.75, "analyzer": {"name": "wordpiece"}}
        options = {BM25_RECORD_KEY: {**bm25, LANGUAGES_RECORD_KEY: languages}}
        store = make_store(kind, f"docs_{language}")
        store.ensure_collection(dataclasses.replace(spec(), name=f"docs_{language}", model_options=options))
        store.upsert(records(corpus))
        for dense, sparse in zip(
            minilm_engine.embed_array(QUERIES), encoder.encode_queries(QUERIES), strict=True
        ):
            legs = store.search(dense, 50), store.search_sparse(sparse, 50)
            hits = store.search_hybrid(dense, sparse, 4)
            assert [(h.id, round(h.score, 5)) for h in hits] == [
                (h.id, round(h.score, 5)) for h in fuse_legs(*legs, 4, fusion)
            ], language
            if language == "italian":
                check_fused(hits, by_hand_scores(*legs, "minmax", OUT_OF_LANGUAGE_FUSION[1]), 4)
