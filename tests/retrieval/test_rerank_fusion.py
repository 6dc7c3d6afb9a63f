"""The fused second stage: CrossEncoderReranker mixes a real cross-encoder's scores with the first
stage's (z-scores, weight), falls back to reciprocal-rank fusion on the input order, or replaces;
Retriever and ColbertRetriever keep every stage's score. Expected values are computed by hand here
from the engine's raw scores, not by poolrag.retrieval.fusion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.ingest import Document, IngestPipeline, TokenChunker
from poolrag.ingest.encoders import DenseEncoder
from poolrag.retrieval import ColbertRetriever, CrossEncoderReranker, Retriever
from poolrag.stores import InMemoryStore

pytestmark = pytest.mark.real_weights

QUERY = "what causes the tides in the sea"
PASSAGES = [
    "Tides are caused mainly by the gravitational pull of the Moon on the oceans.",
    "Honeybees communicate the location of flowers with a waggle dance.",
    "The Moon orbits the Earth roughly once every twenty-seven days.",
    "Oceans cover about seventy percent of the surface of the Earth.",
    "Sourdough bread rises because wild yeast ferments the dough.",
]


@pytest.fixture(scope="module")
def cross_encoder(assets: Path) -> Engine:
    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


def _z(values: list[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    return (x - x.mean()) / x.std()


def _reciprocal_ranks(ranks: list[int], other: list[int], weight: float = 0.5) -> np.ndarray:
    return np.array(
        [2 * (1 - weight) / (60 + a) + 2 * weight / (60 + b) for a, b in zip(ranks, other, strict=True)]
    )


def _ranks(scores: np.ndarray) -> list[int]:
    order = list(np.argsort(-scores, kind="stable"))
    return [order.index(i) + 1 for i in range(len(scores))]


def _raw(cross_encoder: Engine, query: str, texts: list[str]) -> np.ndarray:
    return cross_encoder.score_array(query, texts)


def test_reranker_scores_stay_float64_as_the_server_fuses_them(cross_encoder: Engine) -> None:
    """The server's /rerank and the adapters fuse the backend's float64 scores; a float32 cast here
    would rank near-ties differently from them."""
    reranker = CrossEncoderReranker(cross_encoder)
    scores = reranker.scores(QUERY, PASSAGES)
    assert scores.dtype == np.float64 and reranker.scores(QUERY, []).dtype == np.float64
    np.testing.assert_array_equal(scores, _raw(cross_encoder, QUERY, PASSAGES))
    reranking = reranker.rerank(QUERY, PASSAGES, [0.9, 0.2, 0.5, 0.45, 0.1])
    assert reranking.scores.dtype == reranking.rerank_scores.dtype == np.float64
    np.testing.assert_array_equal(reranking.rerank_scores, scores)


def test_fuse_mixes_z_scores_half_and_half_by_default(cross_encoder: Engine) -> None:
    first = [0.9, 0.2, 0.5, 0.45, 0.1]
    reranking = CrossEncoderReranker(cross_encoder).rerank(QUERY, PASSAGES, first)
    raw = _raw(cross_encoder, QUERY, PASSAGES)
    expected = 0.5 * _z(first) + 0.5 * _z(raw)
    np.testing.assert_allclose(reranking.scores, expected, atol=1e-6)
    np.testing.assert_allclose(reranking.rerank_scores, raw, atol=1e-6)
    assert list(reranking.order) == list(np.argsort(-expected, kind="stable"))


def test_the_weight_moves_the_order_from_the_first_stage_to_the_reranker(cross_encoder: Engine) -> None:
    first = [0.1, 0.2, 0.3, 0.4, 0.5]  # the first stage ranks the passages backwards
    reranker = CrossEncoderReranker(cross_encoder, weight=0.25)
    raw = _raw(cross_encoder, QUERY, PASSAGES)
    np.testing.assert_allclose(
        reranker.rerank(QUERY, PASSAGES, first).scores, 0.75 * _z(first) + 0.25 * _z(raw), atol=1e-6
    )
    assert list(reranker.rerank(QUERY, PASSAGES, first, weight=0.0).order) == [4, 3, 2, 1, 0]
    by_reranker = list(np.argsort(-raw, kind="stable"))
    assert list(reranker.rerank(QUERY, PASSAGES, first, weight=1.0).order) == by_reranker


def test_without_first_stage_scores_fuse_is_rrf_on_the_input_order(cross_encoder: Engine) -> None:
    reranking = CrossEncoderReranker(cross_encoder).rerank(QUERY, PASSAGES)
    raw = _raw(cross_encoder, QUERY, PASSAGES)
    expected = _reciprocal_ranks([1, 2, 3, 4, 5], _ranks(raw))
    np.testing.assert_allclose(reranking.scores, expected, atol=1e-12)
    assert list(reranking.order) == list(np.argsort(-expected, kind="stable"))


def test_rrf_uses_ranks_even_when_scores_exist(cross_encoder: Engine) -> None:
    first = [0.3, 0.9, 0.1, 0.5, 0.2]  # ranks 3, 1, 5, 2, 4
    reranking = CrossEncoderReranker(cross_encoder, second_stage="rrf").rerank(QUERY, PASSAGES, first)
    raw = _raw(cross_encoder, QUERY, PASSAGES)
    np.testing.assert_allclose(reranking.scores, _reciprocal_ranks([3, 1, 5, 2, 4], _ranks(raw)), atol=1e-12)


def test_replace_is_the_rerankers_own_order_and_scores(cross_encoder: Engine) -> None:
    reranking = CrossEncoderReranker(cross_encoder, second_stage="replace").rerank(
        QUERY, PASSAGES, [5.0, 4.0, 3.0, 2.0, 1.0]
    )
    raw = _raw(cross_encoder, QUERY, PASSAGES)
    np.testing.assert_allclose(reranking.scores, raw, atol=1e-6)
    assert list(reranking.order) == list(np.argsort(-raw, kind="stable"))
    assert reranking.order[0] == 0  # the tides passage


def test_settings_are_checked_before_any_model_call(cross_encoder: Engine) -> None:
    with pytest.raises(InvalidInputError, match="unknown second stage 'mix'"):
        CrossEncoderReranker(cross_encoder, second_stage="mix")
    for weight in (-0.1, 1.5, float("nan")):
        with pytest.raises(InvalidInputError, match=r"weight must be a number in \[0, 1\]"):
            CrossEncoderReranker(cross_encoder, weight=weight)
    reranker = CrossEncoderReranker(cross_encoder)
    with pytest.raises(InvalidInputError, match="2 first-stage scores for 5 passages"):
        reranker.rerank(QUERY, PASSAGES, [1.0, 2.0])
    with pytest.raises(InvalidInputError, match="NaN or infinite"):
        reranker.rerank(QUERY, PASSAGES, [1.0, 2.0, float("inf"), 0.0, 0.0])
    assert reranker.rerank_results(QUERY, []) == []


def _mrr(orders: list[list[int]], relevant: list[int]) -> float:
    return float(np.mean([1.0 / (order.index(r) + 1) for order, r in zip(orders, relevant, strict=True)]))


def test_fusion_keeps_a_right_first_stage_that_the_reranker_alone_inverts(cross_encoder: Engine) -> None:
    """The issue's motivation in miniature: for each query the relevant passage is, by
    construction, the one the cross-encoder ranks last; a confident first stage ranks it first and
    the rest in the reranker's reverse order. Replacing drops MRR to 1/5; fusing keeps it."""
    queries = ["what causes the tides in the sea", "how do bees find flowers", "why does bread rise"]
    relevant, first_orders, replaced, fused = [], [], [], []
    for query in queries:
        raw = _raw(cross_encoder, query, PASSAGES)
        by_reranker = list(np.argsort(-raw, kind="stable"))
        first_order = [by_reranker[-1], *reversed(by_reranker[:-1])]  # the reranker's exact inverse
        candidates = [PASSAGES[i] for i in first_order]
        first_scores = [0.80, 0.40, 0.39, 0.38, 0.37]
        relevant.append(0)  # position of the relevant passage among the candidates
        first_orders.append([0, 1, 2, 3, 4])
        replace = CrossEncoderReranker(cross_encoder, second_stage="replace")
        replaced.append(list(replace.rerank(query, candidates, first_scores).order))
        fused.append(list(CrossEncoderReranker(cross_encoder).rerank(query, candidates, first_scores).order))
    assert _mrr(first_orders, relevant) == 1.0
    assert _mrr(replaced, relevant) == pytest.approx(1 / 5)
    assert _mrr(fused, relevant) >= _mrr(first_orders, relevant)


def test_the_funnel_fuses_recall_and_rerank_scores(minilm_engine: Engine, cross_encoder: Engine) -> None:
    store = InMemoryStore("docs")
    embedder = CachedEmbedder(minilm_engine)
    IngestPipeline(
        store,
        DenseEncoder(embedder),
        TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts),
        progress=False,
    ).run([Document(f"{i}.md", text) for i, text in enumerate(PASSAGES)])
    hits = Retriever(store, embedder, reranker=cross_encoder).search(QUERY, k=5)
    assert all(set(h.stage_scores) == {"recall", "rerank", "fused"} for h in hits)
    recall = [h.stage_scores["recall"] for h in hits]
    raw = _raw(cross_encoder, QUERY, [h.text for h in hits])
    np.testing.assert_allclose([h.stage_scores["rerank"] for h in hits], raw, atol=1e-6)
    expected = 0.5 * _z(recall) + 0.5 * _z(raw)
    np.testing.assert_allclose([h.score for h in hits], expected, atol=1e-6)
    assert [h.stage_scores["fused"] for h in hits] == [h.score for h in hits]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].source == "0.md"


def test_colbert_candidates_are_fused_with_their_maxsim(assets: Path, cross_encoder: Engine) -> None:
    colbert = Engine(assets / "colbert-pylate")
    retriever = ColbertRetriever(InMemoryStore("docs"), colbert, reranker=CrossEncoderReranker(cross_encoder))
    retriever.add_texts(PASSAGES)
    hits = retriever.search(QUERY, k=5)
    maxsim = [h.stage_scores["maxsim"] for h in hits]
    raw = _raw(cross_encoder, QUERY, [h.text for h in hits])
    np.testing.assert_allclose([h.score for h in hits], 0.5 * _z(maxsim) + 0.5 * _z(raw), atol=1e-5)
    assert all(set(h.stage_scores) == {"maxsim", "rerank", "fused"} for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_result_without_text_is_named_not_reported_as_an_empty_text_2(cross_encoder: Engine) -> None:
    """A point another writer added (a framework's vector store) has no stored text (seen from
    outside: 'text_2[0] is empty')."""
    from poolrag.retrieval.results import SearchResult

    foreign = SearchResult("abc", 0.8, "", "", None, None)
    stored = SearchResult("def", 0.5, PASSAGES[0], "tides.md", 0, len(PASSAGES[0]))
    with pytest.raises(InvalidInputError, match=r"result 'abc' .* is a point without text: a text reranker"):
        CrossEncoderReranker(cross_encoder).rerank_results(QUERY, [stored, foreign])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("\u200b\u200d", r"is empty \(only whitespace, control or invisible format characters\)"),
        ("\ud800 tides", r"is not valid Unicode \(lone surrogate at character 0\)"),
    ],
)
def test_a_result_whose_text_no_model_reads_is_named_not_reported_as_text_2(
    cross_encoder: Engine, text: str, problem: str
) -> None:
    """A scraped page's zero-width-only chunk, written by another tool, has text that strip() keeps
    but no model reads: the reranker refused it as 'text_2[1] is empty', an index the caller never saw."""
    from poolrag.retrieval.results import SearchResult

    foreign = SearchResult("abc", 0.8, text, "scraped.html", None, None)
    stored = SearchResult("def", 0.5, PASSAGES[0], "tides.md", 0, len(PASSAGES[0]))
    with pytest.raises(
        InvalidInputError, match=rf"result 'abc' \(source 'scraped.html'\) is a point whose text {problem}"
    ):
        CrossEncoderReranker(cross_encoder).rerank_results(QUERY, [stored, foreign])
