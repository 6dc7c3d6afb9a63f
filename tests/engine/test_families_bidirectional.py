"""NVIDIA's bidirectional Llama without remote code: transformers' Llama layers, no causal mask.

References: the published remote code (tests/decoders/decoder_remote_code.py, which builds its
own bidirectional mask) on the same weights, and transformers' LlamaModel given an explicit 4D
all-visible mask. Folders come in the two shapes seen in the wild: ``model_type: "llama"`` and
NVIDIA's ``"llama_bidirec"`` read without its code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from decoders.decoder_remote_code import llama_bidirectional_reranker
from decoders.tiny_decoders import PAD, SIDES, TEXTS, build_tokenizer, normalize, run_padded, tiny_config

from poolrag import Engine
from poolrag.loading.cpu_fast_mode import PackedLinear
from poolrag.models.fused_linear import onednn_available
from poolrag.testing import engine_internals as internals

QUERY = "What is a panda?"


def _values(vocab_size: int) -> dict:
    values = tiny_config("llama", vocab_size).to_dict()
    for key in ("architectures", "transformers_version", "auto_map"):
        values.pop(key, None)
    return values


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """The published layout with its code, and the reference model it builds."""
    folder = tmp_path_factory.mktemp("bidirec-remote")
    tokenizer = build_tokenizer(folder)
    model = llama_bidirectional_reranker(folder, _values(len(tokenizer)))
    return model, transformers.AutoTokenizer.from_pretrained(folder), folder


def _without_code(remote_folder: Path, dest: Path, architecture: str, model_type: str) -> Path:
    shutil.copytree(remote_folder, dest)
    for code in dest.glob("*.py"):
        code.unlink()
    config = json.loads((dest / "config.json").read_text())
    config.pop("auto_map", None)
    config.update(architectures=[architecture], model_type=model_type, pooling="avg", temperature=0.02)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


@pytest.mark.parametrize("model_type", ["llama", "llama_bidirec"])
@pytest.mark.parametrize("side", SIDES)
def test_reranker_matches_the_published_code(remote, tmp_path, model_type, side):
    model, tokenizer, folder = remote
    architecture = "LlamaBidirectionalForSequenceClassification"
    plain = _without_code(folder, tmp_path / "plain", architecture, model_type)
    engine = Engine(plain)
    # backbone -> the config's pooling (mean) -> score, as a decoder classifier's head runs
    assert internals.model_kind(engine).value == "score_head_classifier" and not engine.spec.is_decoder
    seqs = [tokenizer(QUERY, d)["input_ids"] for d in TEXTS]
    logits = run_padded(model, seqs, PAD, side, lambda out, batch, last: out.logits.float().numpy())[:, 0]
    got = np.array([s.outputs.score for s in engine.score(QUERY, TEXTS)])
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-logits)), rtol=1e-5, atol=1e-6)
    # the runner packed the CPU weights of the transformers layers it runs
    backbone = internals.loaded_module(engine)
    packed = any(isinstance(m, PackedLinear) for m in backbone.modules())
    assert packed == onednn_available(torch.float32)


def test_embedder_matches_a_llama_without_its_causal_mask(remote, tmp_path):
    model, tokenizer, folder = remote
    plain = _without_code(folder, tmp_path / "embedder", "LlamaBidirectionalModel", "llama")
    engine = Engine(plain)
    assert engine.pooler_config.pooling_type == "MEAN" and engine.supported_tasks[0] == "embed"
    reference = transformers.LlamaModel.from_pretrained(plain).eval()
    expected = []
    for text in TEXTS:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        visible = torch.zeros((1, 1, ids.shape[1], ids.shape[1]))  # additive 4D mask: all visible
        with torch.no_grad():
            hidden = reference(input_ids=ids, attention_mask=visible).last_hidden_state[0]
            published = model.model(ids).last_hidden_state[0]
        np.testing.assert_allclose(hidden.numpy(), published.numpy(), rtol=1e-5, atol=1e-5)
        expected.append(hidden.mean(0).numpy())
    got = np.stack([r.outputs.embedding for r in engine.embed(TEXTS)])
    np.testing.assert_allclose(got, normalize(np.stack(expected)), rtol=1e-5, atol=1e-6)
    # bidirectional for real: an early token's state depends on a later one
    first = [engine.encode([{"prompt_token_ids": [5, 6, x]}], "token_embed")[0] for x in (7, 9)]
    assert not np.allclose(first[0].outputs.data[0], first[1].outputs.data[0])


def test_unknown_pooling_is_refused(remote, tmp_path):
    from poolrag.errors import ModelLoadError

    *_, folder = remote
    plain = _without_code(folder, tmp_path / "bad", "LlamaBidirectionalModel", "llama")
    config = json.loads((plain / "config.json").read_text())
    (plain / "config.json").write_text(json.dumps({**config, "pooling": "max"}))
    with pytest.raises(ModelLoadError, match="pooling 'max'"):
        Engine(plain)
