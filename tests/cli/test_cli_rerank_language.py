"""``poolrag search --hybrid --rerank MODEL`` fuses an English reranker (its card says ``en``) over a
collection ingested ``--language spanish`` at ``OUT_OF_LANGUAGE_RERANK_WEIGHT``, over an English
collection at ``DEFAULT_RERANK_WEIGHT``, and at ``--rerank-weight`` when one is named (Qdrant local
mode, the packaged ms-marco cross-encoder saved by sentence-transformers with an ``en`` card)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from retrieval.test_rerank_language import save_reranker

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.retrieval import CrossEncoderReranker, Retriever
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT
from poolrag.retrieval.rerank_language import OUT_OF_LANGUAGE_RERANK_WEIGHT
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
QUERY = "what makes the sea rise and fall"


def _fused(store, embedder: CachedEmbedder, sparse: BM25Encoder, cross: Engine, weight: float) -> list:
    """The hybrid hits reranked by ``cross`` fused at ``weight``, as (id, score)."""
    stage = CrossEncoderReranker(cross, weight=weight)
    retriever = Retriever(store, embedder, reranker=stage, sparse_encoder=sparse)
    return [(r.id, round(r.score, 6)) for r in retriever.search(QUERY, 5, mode="hybrid")]


@pytest.mark.real_weights
def test_search_rerank_takes_the_share_the_rerankers_card_and_the_collections_language_give(
    tmp_path: Path, minilm_path: Path, minilm_engine, assets: Path, capsys
) -> None:
    reranker = save_reranker(assets / "ms-marco-MiniLM-L-12-v2", tmp_path / "ce", ["en"])
    cross = Engine(reranker)
    flags = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--model", str(minilm_path)]
    flags += ["--cache", str(tmp_path / "c.sqlite")]
    docs = [str(SAMPLES / "nature"), str(SAMPLES / "cooking")]
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    sparse = BM25Encoder(minilm_engine.tokenizer)
    cases = {
        ("spanish", None): OUT_OF_LANGUAGE_RERANK_WEIGHT,
        ("english", None): DEFAULT_RERANK_WEIGHT,
        ("spanish", 0.6): 0.6,
    }
    for (language, named), share in cases.items():
        collection = f"docs_{language}"
        line = ["ingest", *docs, "--hybrid", "--quiet", "--collection", collection, "--language", language]
        assert main([*line, *flags]) == 0
        weight = [] if named is None else ["--rerank-weight", str(named)]
        capsys.readouterr()
        search = ["search", QUERY, "-k", "5", "--json", "--hybrid", "--collection", collection]
        assert main([*search, "--rerank", str(reranker), *weight, *flags]) == 0
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        store = open_store("qdrant", collection, path=str(tmp_path / "q"))
        try:
            want = _fused(store, embedder, sparse, cross, share)
            assert [(r["id"], round(r["score"], 6)) for r in printed] == want, (language, named)
            assert want != _fused(store, embedder, sparse, cross, 0.35)  # the scores tell the shares apart
        finally:
            store.close()
