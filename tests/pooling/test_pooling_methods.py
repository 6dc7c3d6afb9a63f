"""Pooling methods: each sentence pooling sentence-transformers writes gives its vectors, whatever
the batch's layout (packed rows of different lengths, one sequence or many)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from poolrag import Engine
from poolrag.config.pooler_config import POOLING_TYPES, SENTENCE_POOLING
from poolrag.errors import ModelLoadError
from poolrag.pooling.methods import POOLING_METHODS, pooling_method
from poolrag.runner.forward_output import PackedStates
from poolrag.testing.tiny_models import SENTENCES, build_encoder, write_sentence_transformers

ST_MODES = {name: pooling for pooling, (name, _flag) in SENTENCE_POOLING.items()}


@pytest.mark.parametrize("mode", sorted(ST_MODES))
def test_a_saved_sentence_transformer_pools_as_sentence_transformers_does(
    mode: str, tmp_path: Path, minilm_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = write_sentence_transformers(
        build_encoder(tmp_path / mode, "bert", minilm_path, seed=5), pooling=mode
    )
    engine = Engine(folder)
    assert engine.pooler_config.pooling_type == ST_MODES[mode]
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(engine.embed_array(SENTENCES), reference, atol=1e-5)


@pytest.mark.parametrize("kind", POOLING_TYPES)
def test_an_embedder_takes_every_pooling_method_and_no_other_pooling_type(
    kind: str, tiny_model: Callable[..., Path]
) -> None:
    """The types an embedder accepts are the methods ``pooling/methods.py`` has, whether or not
    sentence-transformers spells them (``SENTENCE_POOLING`` only reads its folders): a method it
    lacks is two files, its class and table entry there and its name in ``PoolingType``."""
    assert set(SENTENCE_POOLING) <= set(POOLING_METHODS)
    if kind not in POOLING_METHODS:  # a reward model's ALL, STEP, SPLADE: no one vector per text
        with pytest.raises(ModelLoadError):
            Engine(tiny_model("bert"), pooler_config={"pooling_type": kind})
        return
    engine = Engine(tiny_model("bert"), pooler_config={"pooling_type": kind})
    assert engine.pooler_config.pooling_type == kind
    assert np.isfinite(engine.embed_array(SENTENCES)).all()


@pytest.mark.parametrize("pooling", sorted(POOLING_METHODS))
def test_a_packed_batch_pools_each_sequence_alone(pooling: str) -> None:
    generator = torch.Generator().manual_seed(0)
    lengths = [3, 1, 7, 2]
    rows = [torch.randn(n, 5, generator=generator) for n in lengths]
    method = pooling_method(pooling)  # type: ignore[arg-type]

    def packed(parts: list[torch.Tensor]) -> PackedStates:
        sizes = torch.tensor([len(p) for p in parts])
        ids = torch.zeros(int(sizes.sum()), dtype=torch.long)
        return PackedStates(states=torch.cat(parts), lengths=sizes, token_ids=ids)

    together = method(packed(rows))
    alone = torch.cat([method(packed([r])) for r in rows])
    torch.testing.assert_close(together, alone, rtol=0, atol=0)
    if pooling == "MAX":
        torch.testing.assert_close(together, torch.stack([r.max(0).values for r in rows]))


INSTRUCTIONS = {
    "query": "Represent the question for retrieving supporting documents: ",
    "passage": "passage: ",
}


@pytest.mark.parametrize("mode", sorted(ST_MODES))
def test_a_pooling_that_leaves_the_prompt_out_pools_as_sentence_transformers_does(
    mode: str, tmp_path: Path, minilm_path: Path
) -> None:
    """``include_prompt: false`` (INSTRUCTOR): the prompt's tokens, with the [CLS] before them,
    attend but are not pooled; the named prompt, the folder's default one, and Matryoshka sizes
    with normalisation all match sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    from poolrag.params import PoolingParams

    folder = write_sentence_transformers(
        build_encoder(tmp_path / mode, "bert", minilm_path, seed=5),
        pooling=mode,
        include_prompt=False,
        prompts=INSTRUCTIONS,
        default_prompt_name="passage",
    )
    engine = Engine(folder, hf_overrides={"is_matryoshka": True})
    reference = SentenceTransformer(str(folder), device="cpu")
    for ours, theirs in [
        (PoolingParams(prompt_name="query"), {"prompt_name": "query"}),
        (None, {}),  # the folder's default prompt
        (
            PoolingParams(prompt_name="query", dimensions=16, normalize=True),
            {"prompt_name": "query", "truncate_dim": 16, "normalize_embeddings": True},
        ),
    ]:
        expected = reference.encode(SENTENCES, **theirs)
        np.testing.assert_allclose(engine.embed_array(SENTENCES, ours), expected, atol=1e-5)
