"""The fused second stage's default share follows the reranker's card and the collection's language:
a reranker whose card says ``en`` over a collection recorded ``es`` fuses at
``OUT_OF_LANGUAGE_RERANK_WEIGHT``; ``en`` over ``en``, a card without languages, or a collection
with no languages record keep ``DEFAULT_RERANK_WEIGHT``; a share the caller names and a saved
``--tune --rerank`` share win. The rerankers are the packaged ms-marco cross-encoder saved again by
sentence-transformers, once with a card declaring ``en`` and once with none."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from retrieval.test_retrieval_hybrid import QUERIES, fill

from poolrag import Engine
from poolrag.retrieval import CrossEncoderReranker, Retriever
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT
from poolrag.retrieval.rerank_language import (
    OUT_OF_LANGUAGE_RERANK_WEIGHT,
    default_rerank_weight,
    reranker_languages,
)
from poolrag.sparse import BM25Encoder
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores import InMemoryStore
from poolrag.stores.language_prior import LANGUAGES_RECORD_KEY, LanguageRecord
from poolrag.stores.retrieval_record import RetrievalRecord, save_record

pytestmark = pytest.mark.real_weights


def save_reranker(asset: Path, folder: Path, languages: list[str] | None) -> Path:
    """The packaged cross-encoder saved by sentence-transformers with a card declaring ``languages``."""
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.model_card import CrossEncoderModelCardData

    card = CrossEncoderModelCardData(language=languages) if languages else None
    CrossEncoder(str(asset), device="cpu", activation_fn=torch.nn.Identity(), model_card_data=card).save(
        str(folder)
    )
    return folder


@pytest.fixture(scope="module")
def rerankers(tmp_path_factory, assets: Path) -> dict[str, Engine]:
    root = tmp_path_factory.mktemp("rerankers")
    asset = assets / "ms-marco-MiniLM-L-12-v2"
    return {
        "en": Engine(save_reranker(asset, root / "en", ["en"])),
        "none": Engine(save_reranker(asset, root / "none", None)),
    }


@pytest.fixture(scope="module")
def bm25(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


def collection(name: str, minilm_engine, bm25: BM25Encoder, language: str | None) -> InMemoryStore:
    """A hybrid collection whose BM25 record holds MiniLM's ``en`` and ``language`` (none: no record)."""
    store = InMemoryStore(name)
    fill(store, minilm_engine, bm25)
    if language is not None:
        languages = LanguageRecord.declared(("en",), language).to_metadata()
        record = {"analyzer": {"name": "wordpiece"}, LANGUAGES_RECORD_KEY: languages}
        store.update_spec(dataclasses.replace(store.read_spec(), model_options={BM25_RECORD_KEY: record}))
    return store


def _ranking(results) -> list[tuple[str, float]]:
    return [(r.id, round(r.score, 9)) for r in results]


def test_the_card_languages_are_read_from_the_saved_folder(rerankers: dict[str, Engine]) -> None:
    assert reranker_languages(rerankers["en"]) == ("en",)
    assert reranker_languages(rerankers["none"]) == ()


@pytest.mark.parametrize(
    ("card", "language", "share"),
    [
        ("en", "spanish", OUT_OF_LANGUAGE_RERANK_WEIGHT),
        ("en", "english", DEFAULT_RERANK_WEIGHT),
        ("none", "spanish", DEFAULT_RERANK_WEIGHT),
        ("en", None, DEFAULT_RERANK_WEIGHT),
    ],
)
def test_a_bare_reranker_fuses_at_the_share_its_card_and_the_collections_language_give(
    card: str, language: str | None, share: float, rerankers: dict[str, Engine], minilm_engine, bm25
) -> None:
    store = collection(f"rl_{card}_{language}", minilm_engine, bm25, language)
    reranker = rerankers[card]
    assert default_rerank_weight(store.read_spec(), reranker_languages(reranker)) == share
    bare = Retriever(store, minilm_engine, reranker=reranker, sparse_encoder=bm25)
    named = Retriever(
        store, minilm_engine, reranker=CrossEncoderReranker(reranker, weight=share), sparse_encoder=bm25
    )
    other = 0.5 if share != 0.5 else 0.2
    elsewhere = Retriever(
        store, minilm_engine, reranker=CrossEncoderReranker(reranker, weight=other), sparse_encoder=bm25
    )
    found = {q: _ranking(bare.search(q, 3, mode="hybrid")) for q in QUERIES}
    for query in QUERIES:
        assert found[query] == _ranking(named.search(query, 3, mode="hybrid"))
    # The fused scores move with the share, so the bare reranker's are the named share's only.
    assert any(found[q] != _ranking(elsewhere.search(q, 3, mode="hybrid")) for q in QUERIES)


def test_a_named_share_and_a_saved_share_win_over_the_language_default(
    rerankers: dict[str, Engine], minilm_engine, bm25
) -> None:
    store = collection("rl_named", minilm_engine, bm25, "spanish")
    named = CrossEncoderReranker(rerankers["en"], weight=0.7)
    assert Retriever(store, minilm_engine, reranker=named, sparse_encoder=bm25).reranker.weight == 0.7
    save_record(store, RetrievalRecord(("minmax", 0.75), 50, 0.35))
    saved = Retriever(store, minilm_engine, reranker=rerankers["en"], sparse_encoder=bm25)
    assert saved.reranker.weight == 0.35
