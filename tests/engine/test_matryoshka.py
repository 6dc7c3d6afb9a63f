"""Matryoshka `dimensions`: truncate before normalising, and only where the model allows it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from poolrag import DimensionsError, Engine, PoolingParams


def test_non_matryoshka_model_refuses_dimensions(minilm_engine: Engine) -> None:
    with pytest.raises(DimensionsError, match="not a Matryoshka model"):
        minilm_engine.embed(["hello"], PoolingParams(dimensions=64))


def test_override_enables_truncation_then_normalisation(minilm_path) -> None:
    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True})
    full = engine.embed_array(["a sentence about cats"])[0]
    short = engine.embed_array(["a sentence about cats"], PoolingParams(dimensions=64))[0]
    assert short.shape == (64,)
    assert np.linalg.norm(short) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(short, full[:64] / np.linalg.norm(full[:64]), atol=1e-6)


@pytest.mark.parametrize("bad", [0, -3, 385])
def test_out_of_range_dimensions_are_errors(minilm_path, bad: int) -> None:
    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True})
    with pytest.raises(DimensionsError, match="between 1 and 384"):
        engine.embed(["hello"], PoolingParams(dimensions=bad))


def test_listed_matryoshka_dimensions_are_the_only_ones_accepted(minilm_path, tmp_path) -> None:
    folder = tmp_path / "mrl"
    shutil.copytree(minilm_path, folder)
    config = json.loads((folder / "config.json").read_text())
    config["matryoshka_dimensions"] = [384, 256, 128, 64]
    (folder / "config.json").write_text(json.dumps(config))
    engine = Engine(folder)
    assert engine.is_matryoshka
    assert engine.embed_array(["x"], PoolingParams(dimensions=128)).shape == (1, 128)
    with pytest.raises(DimensionsError, match=r"one of \[384, 256, 128, 64\]"):
        engine.embed(["x"], PoolingParams(dimensions=100))


def test_dimensions_cut_no_hidden_states(minilm_path) -> None:
    """An embedder's token vectors are its hidden states, not its trained output (a ColBERT model's
    are: tests/engine/test_colbert.py cuts them)."""
    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True})
    with pytest.raises(DimensionsError, match="late-interaction"):
        engine.encode(["x"], pooling_task="token_embed", pooling_params=PoolingParams(dimensions=8))


def test_a_models_default_size_shapes_an_empty_answer_too(minilm_path) -> None:
    """Issue 28, item 5: the size ``verify`` fills is the width of every answer, none or many."""
    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True}, pooler_config={"dimensions": 64})
    assert engine.embed_array(["x"]).shape == (1, 64)
    assert engine.embed_array([]).shape == (0, 64)
    assert engine.embed_array([], PoolingParams(dimensions=384)).shape == (0, 384)
