"""Retriever modes over real stores: sparse (BM25 from the MiniLM tokenizer) and hybrid search
equal the stores' own searches; with 64-dim stored vectors the funnel re-scores the dense leg with
full vectors before the fusion, checked against the default min-max score mix and reciprocal-rank
fusion computed by hand."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from topic_corpus import CORPUS, TOPICS

from poolrag import Engine
from poolrag.cache import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.pooling.matryoshka import truncate
from poolrag.retrieval import Retriever, SparseQueryEncoder
from poolrag.sparse import BM25Encoder, BM25Stats
from poolrag.stores import ChunkRecord, CollectionSpec, InMemoryStore, open_store
from poolrag.stores.errors import UnsupportedStoreFeature

QUERIES = ["XK-4471", "why does bread rise", "Okonkwo bees", "what makes the tides"]


def chunk_id(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"retrieval-hybrid-{i}"))


@pytest.fixture(scope="module")
def bm25(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def matryoshka_minilm(minilm_path: Path) -> Engine:
    return Engine(minilm_path, hf_overrides={"is_matryoshka": True})


def fill(store, backend, bm25: BM25Encoder, dimension: int = 384, sparse: str | None = "bm25"):
    embedder = CachedEmbedder(backend)
    full = embedder.embed_documents(CORPUS)
    vectors = truncate(full, dimension, embedder.normalize)
    counts = bm25.term_counts(CORPUS)
    docs = bm25.document_vectors(counts, BM25Stats.from_term_counts(counts).avg_doc_length)
    facts = backend.facts
    store.ensure_collection(
        CollectionSpec(
            name=store.collection,
            dimension=dimension,
            model_identity=facts.model_identity,
            full_dimension=full.shape[1],
            model_name=facts.model_name,
            sparse=sparse,  # type: ignore[arg-type]
        )
    )
    store.upsert(
        [
            ChunkRecord(
                chunk_id(i),
                vectors[i],
                {"text": t, "source": f"{i}.md", "topic": TOPICS[i]},
                docs[i] if sparse else None,
            )
            for i, t in enumerate(CORPUS)
        ]
    )
    return embedder


@pytest.fixture
def open_kind(tmp_path: Path):
    opened = []

    def make(kind: str):
        if kind == "memory":
            return InMemoryStore("docs")
        location = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / kind)}
        store = open_store(kind, "docs", **location)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.mark.parametrize("kind", ["memory", "qdrant", "milvus"])
def test_sparse_and_hybrid_modes_are_the_stores_searches(kind, open_kind, minilm_engine, bm25) -> None:
    store = open_kind(kind)
    embedder = fill(store, minilm_engine, bm25)
    assert isinstance(bm25, SparseQueryEncoder)
    retriever = Retriever(store, embedder, sparse_encoder=bm25)
    for query in QUERIES:
        sparse = bm25.encode_queries([query])[0]
        dense = embedder.embed_query(query)
        for filter in (None, {"topic": ["heating", "bees"]}):
            got = retriever.search(query, 3, mode="sparse", filter=filter)
            want = store.search_sparse(sparse, 3, filter)
            assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in want]
            assert all(set(h.stage_scores) == {"sparse"} for h in got)
            got = retriever.search(query, 3, mode="hybrid", filter=filter)
            want = store.search_hybrid(dense, sparse, 3, filter=filter)  # both at the default depth
            assert [(h.id, pytest.approx(h.score)) for h in got] == [(h.id, h.score) for h in want]
            assert all(set(h.stage_scores) == {"hybrid"} for h in got)
            for fusion in (("weighted", 0.9), "dbsf", "rrf", ("minmax", 0.3)):
                fused = retriever.search(query, 3, mode="hybrid", fusion=fusion, prefetch=4)
                want = store.search_hybrid(dense, sparse, 3, fusion=fusion, prefetch=4)
                # fused scores lie in [0, 1]; min-max near a leg's minimum turns float32 noise into a
                # large relative error, so they agree to an absolute, not a relative, tolerance
                assert [(h.id, pytest.approx(h.score, abs=1e-6)) for h in fused] == [
                    (h.id, h.score) for h in want
                ]
            dense_only = retriever.search(query, 3, filter=filter)
            assert [h.id for h in dense_only] == [h.id for h in store.search(dense, 3, filter)]
    # The rare part number is found lexically; hybrid keeps it first.
    assert retriever.search("XK-4471", 1, mode="sparse")[0].id == chunk_id(0)
    assert retriever.search("XK-4471", 1, mode="hybrid")[0].id == chunk_id(0)


def test_hybrid_funnel_rescores_the_dense_leg_before_fusing(tmp_path, matryoshka_minilm, bm25) -> None:
    store = open_store("qdrant", "small", path=str(tmp_path / "q"))
    embedder = fill(store, matryoshka_minilm, bm25, dimension=64)
    retriever = Retriever(store, embedder, sparse_encoder=bm25)
    k, depth = 3, 50  # legs go at least 50 deep by default
    for query in QUERIES:
        full = embedder.embed_query(query)
        small = truncate(full[None, :], 64, embedder.normalize)[0]
        recall = store.search(small, 50)  # the funnel's default candidates: max(10 * k, 50)
        full_docs = embedder.embed_documents([h.payload["text"] for h in recall])
        cosine = full_docs @ full / (np.linalg.norm(full_docs, axis=1) * np.linalg.norm(full))
        order = np.argsort(-cosine, kind="stable")[:depth]
        dense_ranking = [recall[i].id for i in order]
        sparse_hits = store.search_sparse(bm25.encode_queries([query])[0], depth)
        sparse_ranking = [h.id for h in sparse_hits]
        expected = rrf_by_hand([dense_ranking, sparse_ranking])[:k]
        by_rank = retriever.search(query, k, mode="hybrid", fusion="rrf")
        assert [(h.id, pytest.approx(h.score)) for h in by_rank] == expected
        # The default: each leg min-max normalised, mixed with the sparse share moved from 0.4 towards
        # the leg whose best score stands out more (cubed z-score of the top score, at least 0), times
        # the fraction of the sparse leg's best 15 hits that the dense leg also holds.
        lean_dense, lean_sparse = (
            0.6 * standout(cosine[order]) ** 3,
            0.4 * standout([h.score for h in sparse_hits]) ** 3,
        )
        share = 0.4 if lean_dense + lean_sparse == 0 else lean_sparse / (lean_dense + lean_sparse)
        share *= len(set(sparse_ranking[:15]) & set(dense_ranking)) / 15
        mixed = dict(zip(dense_ranking, (1 - share) * min_max(cosine[order]), strict=True))
        for cid, value in zip(sparse_ranking, share * min_max([h.score for h in sparse_hits]), strict=True):
            mixed[cid] = mixed.get(cid, 0.0) + value
        got = retriever.search(query, k, mode="hybrid")
        assert [h.score for h in got] == pytest.approx(sorted(mixed.values(), reverse=True)[:k])
        assert all(h.score == pytest.approx(mixed[h.id]) for h in got)
        for hit in got:
            assert hit.stage_scores["hybrid"] == hit.score
            assert ("full" in hit.stage_scores) == (hit.id in dense_ranking)
            assert ("sparse" in hit.stage_scores) == (hit.id in sparse_ranking)
        # Without the re-score, the store fuses the 64-dim ranking itself.
        plain = retriever.search(query, k, mode="hybrid", rescore=False)
        sparse = bm25.encode_queries([query])[0]
        assert [h.id for h in plain] == [h.id for h in store.search_hybrid(small, sparse, k, prefetch=depth)]
    store.close()


def rrf_by_hand(rankings: list[list[str]]) -> list[tuple[str, float]]:
    """``Σ 1 / (60 + rank)`` over the rankings an id is in, best first; ties in first-appearance order."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1 / (60 + rank)
    return sorted(fused.items(), key=lambda pair: -pair[1])


def standout(scores) -> float:
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) < 3 or scores.std() == 0:
        return 0.0
    return max((scores[0] - scores.mean()) / scores.std(), 0.0)


def min_max(scores) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    span = scores.max() - scores.min()
    return (scores - scores.min()) / span if span else np.ones_like(scores)


def test_modes_are_checked(open_kind, minilm_engine, bm25) -> None:
    dense_store = open_kind("memory")
    fill(dense_store, minilm_engine, bm25, sparse=None)
    with pytest.raises(UnsupportedStoreFeature, match="no sparse field"):
        Retriever(dense_store, minilm_engine, sparse_encoder=bm25).search("x", 2, mode="hybrid")
    hybrid_store = InMemoryStore("hybrid")
    fill(hybrid_store, minilm_engine, bm25)
    without_encoder = Retriever(hybrid_store, minilm_engine)
    with pytest.raises(InvalidInputError, match="need a sparse_encoder"):
        without_encoder.search("x", 2, mode="sparse")
    assert len(without_encoder.search("boiler", 2)) == 2  # dense search needs no sparse encoder
    retriever = Retriever(hybrid_store, minilm_engine, sparse_encoder=bm25)
    with pytest.raises(InvalidInputError, match="mode must be one of"):
        retriever.search("x", 2, mode="lexical")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="fusion must be"):
        retriever.search("x", 2, mode="hybrid", fusion="max")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="prefetch must be"):
        retriever.search("x", 2, mode="hybrid", prefetch=0)
    # a sparse search for nothing is refused as a dense one is, not answered "no results"
    for mode in ("sparse", "dense", "hybrid"):  # named as the query in every mode, not as input[0]
        with pytest.raises(InvalidInputError, match=r"^query is empty"):
            retriever.search("  ", 2, mode=mode)
    with pytest.raises(InvalidInputError, match="no terms the collection's sparse encoder keeps"):
        retriever.search("!!! ???", 2, mode="sparse")
    assert len(retriever.search("!!! ???", 2, mode="hybrid")) == 2  # the dense leg still answers
    with pytest.raises(InvalidInputError, match="encode_queries"):
        Retriever(hybrid_store, minilm_engine, sparse_encoder=object())  # type: ignore[arg-type]
