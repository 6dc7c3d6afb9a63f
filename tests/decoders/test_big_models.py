"""Big-model placement: a fit check before loading, accelerate device maps, int8 weights (torchao)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import transformers
from tiny_decoders import TEXTS, build

from poolrag import Engine
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.loading.placement import Placement, bytes_needed, check_fits, checkpoint_parameter_count
from poolrag.testing import engine_internals as internals

GIB = 1024**3


@pytest.fixture(scope="module")
def qwen3_embedder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen3-big")
    model, _tokenizer = build(folder, "qwen3", transformers.AutoModel)
    return folder, model, Engine(folder)


def test_parameter_count_is_read_from_safetensors_headers(qwen3_embedder):
    folder, model, _ = qwen3_embedder
    assert checkpoint_parameter_count(folder) == sum(p.numel() for p in model.parameters())
    assert checkpoint_parameter_count(folder / "1_Pooling") is None  # no checkpoint there


def test_a_model_that_cannot_fit_is_refused_with_the_ways_out():
    seven_billion = 7_000_000_000
    need_bf16 = bytes_needed(seven_billion, torch.bfloat16, None)
    need_int8 = bytes_needed(seven_billion, torch.bfloat16, "int8")
    assert need_bf16 == pytest.approx(2 * 1.2 * seven_billion) and need_int8 == need_bf16 // 2
    with pytest.raises(ModelLoadError, match=r"device_map=.auto.*quantization=.int8.") as error:
        check_fits(need_bf16, 12 * GIB, torch.device("cuda:0"))
    assert "15.6 GiB" in str(error.value) and "12.0 GiB" in str(error.value)
    check_fits(need_int8, 12 * GIB, torch.device("cuda:0"))  # 8-bit weights fit: no error


def test_device_map_places_the_model_through_accelerate(qwen3_embedder, monkeypatch):
    folder, _model, engine = qwen3_embedder
    assert Placement(device_map="auto").from_pretrained_kwargs(torch.device("cpu")) == {"device_map": "auto"}
    placed = Engine(folder, device_map="auto")
    assert internals.runner(placed).device == torch.device("cpu")  # inputs go where the embeddings are
    np.testing.assert_allclose(placed.embed_array(TEXTS), engine.embed_array(TEXTS), atol=1e-6)
    monkeypatch.setitem(sys.modules, "accelerate", None)  # as if accelerate were not installed
    with pytest.raises(ModelLoadError, match="device_map needs accelerate"):
        Engine(folder, device_map="auto")


def test_device_map_works_for_decoder_heads_too(tmp_path):
    build(tmp_path, "llama", transformers.AutoModelForSequenceClassification, num_labels=1)
    plain, placed = Engine(tmp_path), Engine(tmp_path, device_map={"": "cpu"})
    expected = [r.outputs.data for r in plain.reward(TEXTS)]
    np.testing.assert_allclose([r.outputs.data for r in placed.reward(TEXTS)], expected, atol=1e-6)


def test_int8_weights_stay_close_to_full_precision(qwen3_embedder):
    folder, _model, engine = qwen3_embedder
    quantized = Engine(folder, quantization="int8")
    kwargs = Placement(quantization="int8").from_pretrained_kwargs(torch.device("cpu"))
    assert (
        kwargs["device_map"] == {"": "cpu"}
        and type(kwargs["quantization_config"]).__name__ == "TorchAoConfig"
    )
    layer = internals.loaded_module(quantized).layers[0].self_attn.q_proj
    assert type(layer.weight).__module__.startswith("torchao")  # the weights really are int8
    full, eight_bit = engine.embed_array(TEXTS), quantized.embed_array(TEXTS)
    cosine = (full * eight_bit).sum(axis=1)
    assert np.all(cosine > 0.99) and not np.allclose(full, eight_bit, atol=1e-7)


def test_unknown_quantization_is_refused(qwen3_embedder):
    folder, *_ = qwen3_embedder
    with pytest.raises(InvalidInputError, match="quantization must be one of int8, fp8, not 'int3'"):
        Engine(folder, quantization="int3")  # refused by EngineArgs' rule, before anything loads
    assert Placement().places_itself is False and Placement(device_map="auto").places_itself is True
