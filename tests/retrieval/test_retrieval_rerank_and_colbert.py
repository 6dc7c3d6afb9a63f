"""Cross-encoder reranking after the funnel, and ColBERT MaxSim retrieval in Qdrant (native
multivector) and Milvus (one row per token vector, exact MaxSim re-scoring)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.ingest import ColbertEncoder, Document, IngestPipeline, TokenChunker
from poolrag.ingest.encoders import DenseEncoder
from poolrag.retrieval import ColbertRetriever, CrossEncoderReranker, Retriever
from poolrag.stores import open_store

pytestmark = pytest.mark.real_weights

PASSAGES = {
    "tides": "Tides are caused mainly by the gravitational pull of the Moon on the oceans.",
    "bees": "Honeybees communicate the location of flowers with a waggle dance.",
    "bread": "Sourdough bread rises because wild yeast ferments the dough.",
    "rust": "The Rust borrow checker prevents data races at compile time.",
    "moon": "The Moon orbits the Earth roughly once every twenty-seven days.",
    "ocean": "Oceans cover about seventy percent of the surface of the Earth.",
}
DOCS = [Document(f"{name}.md", text) for name, text in PASSAGES.items()]


@pytest.fixture(scope="module")
def cross_encoder(assets: Path) -> Engine:
    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


@pytest.fixture(scope="module")
def colbert(assets: Path) -> Engine:
    return Engine(assets / "colbert-pylate")


def test_cross_encoder_reranks_the_funnels_candidates(tmp_path: Path, minilm_engine, cross_encoder) -> None:
    store = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    embedder = CachedEmbedder(minilm_engine)
    IngestPipeline(
        store,
        DenseEncoder(embedder),
        TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run(DOCS)
    query = "what causes the tides in the sea"
    replace = CrossEncoderReranker(cross_encoder, second_stage="replace")  # fused: test_rerank_fusion.py
    hits = Retriever(store, embedder, reranker=replace).search(query, k=3)
    assert hits[0].source == "tides.md"
    expected = [o.outputs.score for o in cross_encoder.score(query, [h.text for h in hits])]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)
    assert all(set(h.stage_scores) == {"recall", "rerank"} for h in hits)
    assert hits[0].score >= hits[1].score >= hits[2].score
    with pytest.raises(InvalidInputError, match=r"not a cross-encoder \(it scores by cosine\)"):
        CrossEncoderReranker(minilm_engine)
    store.close()


def test_a_model_that_scores_no_pairs_is_refused_naming_what_it_runs(assets: Path) -> None:
    token_classifier = Engine(assets / "rampart-pii")
    refusal = r"not a cross-encoder \(it runs token_classify.*, not score\)"
    with pytest.raises(InvalidInputError, match=refusal):
        CrossEncoderReranker(token_classifier)


@pytest.mark.parametrize("kind", ["qdrant", "milvus"])
def test_colbert_collections_rank_by_exact_maxsim(kind: str, tmp_path: Path, colbert: Engine) -> None:
    location = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / "q")}
    store = open_store(kind, "colbert", **location)
    report = IngestPipeline(
        store,
        ColbertEncoder(colbert),
        TokenChunker.for_model(colbert.tokenizer, colbert.facts),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run(DOCS)
    assert report.upserted == len(DOCS) and store.count() == len(DOCS)
    assert store.read_spec().layout == "multivector"

    query = "how do bees tell others where the flowers are"
    hits = ColbertRetriever(store, colbert).search(query, k=3)
    assert hits[0].source == "bees.md"
    expected = {
        o_text: o.outputs.score
        for o_text, o in zip(
            [h.text for h in hits], colbert.score(query, [h.text for h in hits]), strict=True
        )
    }
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.text], rel=1e-3)
    stored = store.fetch_vectors([hits[0].id])[hits[0].id]
    fresh = colbert.encode(PASSAGES["bees"], pooling_task="token_embed")[0].outputs.data
    np.testing.assert_allclose(stored, np.asarray(fresh), atol=1e-5)
    again = IngestPipeline(
        store,
        ColbertEncoder(colbert),
        TokenChunker.for_model(colbert.tokenizer, colbert.facts),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run(DOCS)
    assert (again.upserted, again.embedded) == (0, 0) and store.count() == len(DOCS)
    store.close()
