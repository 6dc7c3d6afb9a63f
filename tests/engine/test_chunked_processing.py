"""pooler_config ``enable_chunked_processing`` / ``max_embed_len``: long inputs embedded in chunks.

The reference is computed by hand on transformers: the text's tokens cut into windows, each
framed by [CLS] ... [SEP], each pooled as the model pools, then the token-count-weighted mean of
the chunk vectors, normalised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from poolrag import Engine, InputTooLongError, InvalidInputError, PoolingParams
from poolrag.errors import ModelLoadError

WINDOW = 16
LONG = " ".join(["Pooling models turn long documents into vectors, one window at a time."] * 6)


@torch.no_grad()
def _reference(folder: Path, text: str, pooling: str, normalize: bool = True) -> np.ndarray:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    bare = tokenizer(text, add_special_tokens=False)["input_ids"]
    width = WINDOW - 2
    vectors, weights = [], []
    for start in range(0, len(bare), width):
        ids = [tokenizer.cls_token_id, *bare[start : start + width], tokenizer.sep_token_id]
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
        vectors.append((hidden[0] if pooling == "CLS" else hidden.mean(0)).double().numpy())
        weights.append(len(ids))
    mean = np.average(np.stack(vectors), axis=0, weights=weights)
    return mean / np.linalg.norm(mean) if normalize else mean


@pytest.fixture(scope="module")
def folder(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("bert")


@pytest.mark.parametrize("pooling", ["CLS", "MEAN"])
def test_a_long_input_is_the_weighted_mean_of_its_chunks(folder: Path, pooling: str) -> None:
    engine = Engine(
        folder,
        max_model_len=WINDOW,
        pooler_config={"pooling_type": pooling, "enable_chunked_processing": True},
    )
    out = engine.embed(LONG)[0]
    assert len(out.prompt_token_ids) > 3 * WINDOW  # the whole input, not a window of it
    np.testing.assert_allclose(out.outputs.embedding, _reference(folder, LONG, pooling), rtol=1e-4, atol=1e-5)
    raw = engine.embed(LONG, PoolingParams(normalize=False))[0].outputs.embedding
    np.testing.assert_allclose(raw, _reference(folder, LONG, pooling, normalize=False), rtol=1e-4, atol=1e-5)
    # asyncio and the array API take the same path
    np.testing.assert_allclose(asyncio.run(engine.aembed(LONG))[0].outputs.embedding, out.outputs.embedding)
    np.testing.assert_allclose(engine.embed_array([LONG, "short"])[0], out.outputs.embedding)


def test_short_inputs_and_truncation_are_unchanged(folder: Path) -> None:
    chunked = Engine(folder, max_model_len=WINDOW, pooler_config='{"enable_chunked_processing": true}')
    plain = Engine(folder, max_model_len=WINDOW)
    texts = ["short text", "another short one"]
    np.testing.assert_allclose(chunked.embed_array(texts), plain.embed_array(texts), atol=1e-6)
    truncated = PoolingParams(truncate_prompt_tokens=-1)  # asked to truncate: truncation wins
    np.testing.assert_allclose(
        chunked.embed(LONG, truncated)[0].outputs.embedding,
        plain.embed(LONG, truncated)[0].outputs.embedding,
        atol=1e-6,
    )
    with pytest.raises(InputTooLongError):  # a model without chunks refuses when told not to cut
        plain.embed(LONG, PoolingParams(truncate=False))
    scores = chunked.score("pooling models", [LONG, "vectors"])
    assert all(-1.0 <= s.outputs.score <= 1.0 for s in scores)


def test_max_embed_len_caps_the_whole_input(folder: Path) -> None:
    tokens = len(Engine(folder).tokenize(LONG))
    engine = Engine(
        folder,
        max_model_len=WINDOW,
        pooler_config={"enable_chunked_processing": True, "max_embed_len": tokens - 1},
    )
    with pytest.raises(InputTooLongError, match="max_embed_len") as error:
        engine.embed(LONG)
    assert error.value.num_tokens == tokens and error.value.max_len == tokens - 1
    roomy = Engine(
        folder,
        max_model_len=WINDOW,
        pooler_config={"enable_chunked_processing": True, "max_embed_len": tokens},
    )
    assert roomy.embed(LONG)[0].outputs.embedding.shape == (32,)


def test_chunking_settings_that_cannot_apply_are_refused(tiny_model: Callable[..., Path]) -> None:
    with pytest.raises(ModelLoadError, match="embedding models"):
        Engine(tiny_model("bert", head="sequence"), pooler_config={"enable_chunked_processing": True})
    with pytest.raises(ModelLoadError, match="needs enable_chunked_processing"):
        Engine(tiny_model("bert"), pooler_config={"max_embed_len": 100})


def test_matryoshka_dimensions_apply_to_the_joined_vector(folder: Path) -> None:
    engine = Engine(
        folder,
        max_model_len=WINDOW,
        hf_overrides={"is_matryoshka": True},
        pooler_config={"pooling_type": "MEAN", "enable_chunked_processing": True},
    )
    got = engine.embed(LONG, PoolingParams(dimensions=8))[0].outputs.embedding
    full = _reference(folder, LONG, "MEAN", normalize=False)[:8]
    np.testing.assert_allclose(got, full / np.linalg.norm(full), rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_a_prompt_the_pool_leaves_out_is_left_out_of_the_first_chunk(
    tmp_path: Path, minilm_path: Path
) -> None:
    """``include_prompt: false`` with chunking: the first chunk holds the prompt, and its [CLS] and
    prompt rows are neither pooled nor counted in the chunk's weight; later chunks pool whole."""
    from poolrag.testing.tiny_models import build_encoder, write_sentence_transformers

    folder = write_sentence_transformers(
        build_encoder(tmp_path / "m", "bert", minilm_path, seed=5), include_prompt=False
    )
    engine = Engine(folder, max_model_len=WINDOW, pooler_config={"enable_chunked_processing": True})
    ours = engine.embed(LONG, PoolingParams(prompt="query: ", normalize=False))[0].outputs.embedding

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    skip = len(tokenizer("query: ")["input_ids"]) - 1  # [CLS] and the prompt, as sentence-transformers counts
    bare = tokenizer("query: " + LONG, add_special_tokens=False)["input_ids"]
    vectors, weights = [], []
    for start in range(0, len(bare), WINDOW - 2):
        ids = [tokenizer.cls_token_id, *bare[start : start + WINDOW - 2], tokenizer.sep_token_id]
        pooled = model(input_ids=torch.tensor([ids])).last_hidden_state[0][skip if start == 0 else 0 :]
        vectors.append(pooled.mean(0).double().numpy())
        weights.append(len(pooled))
    expected = np.average(np.stack(vectors), axis=0, weights=weights)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)


def test_a_left_out_prompt_longer_than_a_window_is_refused(tmp_path: Path, minilm_path: Path) -> None:
    """``include_prompt: false`` with chunking and a prompt that fills the first window: the first
    chunk was all prompt, weighed by a negative count (its rows less the prompt's), and the
    prompt's rest was pooled as text in the second; refused as without chunking."""
    from poolrag.testing.tiny_models import build_encoder, write_sentence_transformers

    folder = write_sentence_transformers(
        build_encoder(tmp_path / "m", "bert", minilm_path, seed=5), include_prompt=False
    )
    engine = Engine(folder, max_model_len=WINDOW, pooler_config={"enable_chunked_processing": True})
    prompt = "Represent this long instruction for the retrieval of scientific papers, articles and books: "
    assert len(engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]) > WINDOW - 2
    with pytest.raises(InvalidInputError, match="the prompt leaves no room for text"):
        engine.embed(LONG, PoolingParams(prompt=prompt))
