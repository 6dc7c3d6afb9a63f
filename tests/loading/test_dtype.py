"""Which device and dtype an engine runs with: a device this process cannot reach is one line naming
it, before any weights load (on any machine: each case below is unreachable wherever it runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from poolrag import Engine, InvalidInputError
from poolrag.loading.dtype import resolve_device
from poolrag.testing.engine_internals import runner
from poolrag.testing.tiny_models import copy_tokenizer


def unreachable_cuda() -> str:
    """A CUDA device this machine does not have: any at all without CUDA, else one past the last."""
    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


def test_unset_is_the_gpu_when_there_is_one_else_the_cpu() -> None:
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_a_device_torch_does_not_know_is_one_line() -> None:
    with pytest.raises(InvalidInputError, match=r"^device 'gpu0' is not a device torch knows"):
        resolve_device("gpu0")


def test_a_device_this_machine_cannot_reach_is_refused_naming_it() -> None:
    name = unreachable_cuda()
    with pytest.raises(InvalidInputError, match=rf"^device '{name}' is not available here: "):
        resolve_device(name)
    if not torch.backends.mps.is_available():
        with pytest.raises(InvalidInputError, match="no MPS"):
            resolve_device("mps")


def test_the_engine_refuses_it_before_loading_anything(minilm_path) -> None:
    with pytest.raises(InvalidInputError, match="is not available here"):
        Engine(minilm_path, device=unreachable_cuda())


@pytest.mark.parametrize(("name", "expected"), [("AUTO", torch.float32), ("BF16", torch.bfloat16)])
def test_a_dtype_name_is_read_whatever_its_case(minilm_path, name: str, expected: torch.dtype) -> None:
    """EngineArgs accepts ``AUTO`` (vLLM lowercases it too): the engine must run with it, not refuse
    it as an unknown dtype whose message says to use ``auto``."""
    engine = Engine(minilm_path, device="cpu", dtype=name)
    assert engine.dtype == expected
    assert next(runner(engine).model.parameters()).dtype == expected
    (out,) = engine.embed(["hello"])
    assert out.outputs.embedding.dtype == np.float32  # the caller gets float32, as vLLM returns


@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn, torch.complex64])
def test_a_torch_dtype_no_model_runs_in_is_refused_before_loading(minilm_path, dtype: torch.dtype) -> None:
    """One line naming it, not transformers' refusal with a trust_remote_code hint or an engine
    built whose first call fails in a kernel (``"add_stub" not implemented for 'Float8_e4m3fn'``)."""
    with pytest.raises(InvalidInputError, match=rf"^dtype {dtype} cannot run a model here"):
        Engine(minilm_path, device="cpu", dtype=dtype)
    # float64 runs (vLLM takes any torch.dtype): an exact reference, never refused with those
    assert Engine(minilm_path, device="cpu", dtype=torch.float64).embed_array(["hello"]).dtype == np.float32


def test_a_bad_dtype_is_refused_before_the_model_is_looked_up(tmp_path) -> None:
    """As a bad device is: the dtype is one line before a hub id is fetched or a folder read."""
    with pytest.raises(InvalidInputError, match="cannot run a model here"):
        Engine(tmp_path / "no-such-model", device="cpu", dtype=torch.int8)


@pytest.fixture(scope="module")
def tiny_gemma2(tmp_path_factory, minilm_path) -> Path:
    """A Gemma-2 backbone saved with save_pretrained (MiniLM's tokenizer: its vocabulary size)."""
    folder = tmp_path_factory.mktemp("gemma2")
    torch.manual_seed(0)
    config = transformers.Gemma2Config(
        vocab_size=30522, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8, sliding_window=256, pad_token_id=0,
    )  # fmt: skip
    transformers.AutoModel.from_config(config).eval().save_pretrained(folder)
    copy_tokenizer(minilm_path, folder)
    return folder


def test_float16_is_refused_for_a_model_that_overflows_in_it(tiny_gemma2: Path) -> None:
    """vLLM refuses float16 for Gemma-2/3, PLaMo-2 and GLM-4 (their activations overflow it, so real
    checkpoints give inf/NaN vectors); bfloat16 runs."""
    with pytest.raises(
        InvalidInputError, match=r"^gemma2 models overflow in float16 .*'bfloat16' or 'float32'"
    ):
        Engine(tiny_gemma2, device="cpu", dtype="half")
    engine = Engine(tiny_gemma2, device="cpu", dtype="bfloat16")
    assert engine.dtype == torch.bfloat16
    assert np.isfinite(engine.embed_array(["hello"])).all()
