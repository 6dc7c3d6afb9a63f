"""The public seams that let the doors (ingest, Ray, the server's /tokenize) work without the
engine's wiring: the batch budget, token ids framed as the model's input, bare tokenisation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from server.model_folders import build_pylate_colbert

from poolrag import Engine, InvalidInputError
from poolrag.batching.token_budget import default_batch_tokens
from poolrag.testing.tiny_models import build_encoder, write_sentence_transformers

TEXTS = ["Glaciers carve valleys.", "  two\n\nparagraphs, naïve 日本 words  ", "a"]


def test_max_batch_tokens_is_the_budget_asked_for_or_the_devices_default(
    tiny_model: Callable[..., Path],
) -> None:
    folder = tiny_model("bert")
    assert Engine(folder, max_batch_tokens=1536).max_batch_tokens == 1536
    engine = Engine(folder)
    assert engine.max_batch_tokens == default_batch_tokens(engine.device)
    assert isinstance(engine.max_batch_tokens, int)


def test_frame_token_ids_gives_the_ids_the_text_path_reads(minilm_engine: Engine) -> None:
    for text in TEXTS:
        bare = minilm_engine.tokenize(text, add_special_tokens=False)
        framed = minilm_engine.frame_token_ids(bare, "document")
        assert framed == minilm_engine.tokenize(text)
        assert framed != bare  # the special tokens were added
    # the same input, so the same vector as the text
    by_ids = minilm_engine.embed_array([{"prompt_token_ids": minilm_engine.frame_token_ids([2023, 2003])}])
    assert by_ids.shape == (1, minilm_engine.embedding_dim)


def test_frame_token_ids_is_none_where_the_ids_are_not_the_models_input(
    minilm_path: Path, tmp_path: Path
) -> None:
    folder = build_encoder(tmp_path / "prompted", "bert", minilm_path)
    write_sentence_transformers(folder, normalize=True, prompts={"query": "query: ", "document": "passage: "})
    prompted = Engine(folder)
    ids = prompted.tokenize(TEXTS[0], add_special_tokens=False)
    assert prompted.frame_token_ids(ids, "document") is None  # "passage: " would be missing
    assert prompted.frame_token_ids(ids) == prompted.tokenize(TEXTS[0])  # no prompt without a type
    colbert = Engine(build_pylate_colbert(tmp_path / "colbert", minilm_path))
    assert colbert.frame_token_ids(ids, "document") is None  # ColBERT inserts its marker token


def test_tokenize_without_special_tokens_is_the_tokenizers_bare_ids(minilm_engine: Engine) -> None:
    tokenizer = minilm_engine.tokenizer
    for text in TEXTS:
        assert (
            minilm_engine.tokenize(text, add_special_tokens=False)
            == tokenizer(text, add_special_tokens=False)["input_ids"]
        )
    with pytest.raises(InvalidInputError):
        minilm_engine.tokenize(" \n ", add_special_tokens=False)
