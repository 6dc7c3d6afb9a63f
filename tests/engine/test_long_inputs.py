"""Issue 45, item 2: one long-input policy for every door, as the anchors users come from.

An input over the model's length keeps its first tokens by default (sentence-transformers, TEI,
Cohere, infinity), is counted (``core_stats.truncated_inputs``, each output's ``truncated``), and is
refused with today's :class:`InputTooLongError` when ``Engine(truncate=False)`` or a call's
``PoolingParams(truncate=False)`` says so. ``poolrag.LLM`` keeps vLLM's behaviour: refused unless a
call truncates. Cross-encoder pairs are cut as sentence-transformers' ``CrossEncoder`` cuts them.
The in-process doors are checked here; the server's in tests/server/test_long_inputs.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from poolrag import LLM, Engine, EngineArgs, InputTooLongError, InvalidInputError, PoolingParams
from poolrag.testing.long_texts import LONG_TOKENS, long_paragraph

SHORT = "Honeybees dance to show where the flowers are."
QUERY = "How do honeybees share where food is?"


@pytest.fixture(scope="module")
def texts(minilm_engine: Engine) -> list[str]:
    """Three 277-token paragraphs (all-MiniLM-L6-v2 reads 256) around a short text."""
    tokenizer = minilm_engine.tokenizer
    return [long_paragraph(tokenizer, 0), SHORT, long_paragraph(tokenizer, 1), long_paragraph(tokenizer, 2)]


@pytest.fixture(scope="module")
def reference(minilm_path: Path, texts: list[str]) -> np.ndarray:
    """sentence-transformers' vectors of the same texts from the same folder (it truncates)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_path), device="cpu")
    return model.encode(texts, convert_to_numpy=True, normalize_embeddings=False)


def test_the_engine_truncates_by_default_as_sentence_transformers_does(
    minilm_engine: Engine, texts: list[str], reference: np.ndarray
) -> None:
    assert len(minilm_engine.tokenize(texts[0])) == LONG_TOKENS > minilm_engine.max_model_len
    before = minilm_engine.core_stats.truncated_inputs
    vectors = minilm_engine.embed_array(texts)
    np.testing.assert_allclose(vectors, reference, rtol=0, atol=1e-6)
    assert minilm_engine.core_stats.truncated_inputs - before == 3
    outputs = minilm_engine.embed(texts)
    assert [out.truncated for out in outputs] == [True, False, True, True]
    assert [out.num_tokens for out in outputs][::2] == [256, 256]
    np.testing.assert_allclose(asyncio.run(minilm_engine.aembed_array(texts)), vectors, rtol=0, atol=1e-6)
    # what the default does is what asking for it does
    for asked in (PoolingParams(truncate=True), PoolingParams(truncate_prompt_tokens=-1)):
        np.testing.assert_array_equal(minilm_engine.embed_array(texts, asked), vectors)
    # a cosine score of one long query against four documents cuts (and counts) the query once
    before = minilm_engine.core_stats.truncated_inputs
    minilm_engine.score(texts[0], [SHORT] * 4)
    assert minilm_engine.core_stats.truncated_inputs - before == 1


def test_a_call_refuses_with_todays_error(minilm_engine: Engine, texts: list[str]) -> None:
    message = f"{LONG_TOKENS} tokens, more than the model's maximum of 256"
    with pytest.raises(InputTooLongError, match=message):
        minilm_engine.embed_array(texts, PoolingParams(truncate=False))
    with pytest.raises(InputTooLongError):
        asyncio.run(minilm_engine.aembed(texts, PoolingParams(truncate=False)))
    assert minilm_engine.embed_array([SHORT], PoolingParams(truncate=False)).shape == (1, 384)
    with pytest.raises(InvalidInputError, match="give one"):
        PoolingParams(truncate=False, truncate_prompt_tokens=-1)
    with pytest.raises(InvalidInputError, match="truncate must be True or False"):
        PoolingParams(truncate="no")  # type: ignore[arg-type]


def test_engine_truncate_false_refuses_unless_a_call_truncates(
    minilm_path: Path, minilm_engine: Engine, texts: list[str]
) -> None:
    refusing = Engine(minilm_path, truncate=False)
    with pytest.raises(InputTooLongError):
        refusing.embed_array(texts)
    with pytest.raises(InputTooLongError):
        refusing.score(QUERY, texts)
    expected = minilm_engine.embed_array(texts)
    np.testing.assert_allclose(refusing.embed_array(texts, PoolingParams(truncate=True)), expected, atol=1e-6)
    with pytest.raises(InvalidInputError, match="truncate must be True or False"):
        EngineArgs("some/model", truncate="yes")  # type: ignore[arg-type]


def test_llm_keeps_vllms_behaviour(minilm_path: Path, minilm_engine: Engine, texts: list[str]) -> None:
    llm = LLM(str(minilm_path))
    with pytest.raises(InputTooLongError):
        llm.embed(texts, use_tqdm=False)
    expected = minilm_engine.embed_array(texts)
    for asked in ({"truncate_prompt_tokens": -1}, {"tokenization_kwargs": {"truncation": True}}):
        got = np.array([out.outputs.embedding for out in llm.embed(texts, use_tqdm=False, **asked)])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_an_over_long_pair_is_cut_as_sentence_transformers_cross_encoder_cuts_it(assets: Path) -> None:
    from sentence_transformers import CrossEncoder

    folder = assets / "ms-marco-MiniLM-L-12-v2"
    engine = Engine(folder)
    documents = [long_paragraph(engine.tokenizer, 3, tokens=engine.max_model_len + 60), SHORT]
    scores = engine.score(QUERY, documents)
    assert [s.truncated for s in scores] == [True, False]
    reference = CrossEncoder(str(folder), device="cpu").predict([(QUERY, d) for d in documents])
    np.testing.assert_allclose([s.outputs.score for s in scores], reference, rtol=0, atol=1e-6)
    with pytest.raises(InputTooLongError):
        engine.score(QUERY, documents, PoolingParams(truncate=False))


def test_a_cosine_score_of_long_texts_is_the_cosine_of_their_truncated_vectors(
    minilm_engine: Engine, texts: list[str]
) -> None:
    scores = minilm_engine.score(QUERY, texts)
    assert [s.truncated for s in scores] == [True, False, True, True]
    vectors = minilm_engine.embed_array([QUERY, *texts])
    np.testing.assert_allclose([s.outputs.score for s in scores], vectors[1:] @ vectors[0], atol=1e-6)
    with pytest.raises(InputTooLongError):
        minilm_engine.score(QUERY, texts, PoolingParams(truncate=False))
