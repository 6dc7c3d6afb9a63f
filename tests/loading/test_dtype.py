"""Which device and dtype an engine runs with: a device this process cannot reach is one line naming
it, before any weights load (on any machine: each case below is unreachable wherever it runs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from poolrag import Engine, InvalidInputError
from poolrag.loading.dtype import resolve_device
from poolrag.testing.engine_internals import runner


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


@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn, torch.float64])
def test_a_torch_dtype_no_name_gives_is_refused_before_loading(minilm_path, dtype: torch.dtype) -> None:
    """A ``torch.dtype`` the names do not give is one line naming it, as the name ``float64`` is; not
    transformers' refusal with a trust_remote_code hint, a kernel's NotImplementedError, or a model
    quietly run in a precision the names refuse."""
    with pytest.raises(InvalidInputError, match=rf"^dtype {dtype} cannot run a model here"):
        Engine(minilm_path, device="cpu", dtype=dtype)


def test_a_bad_dtype_is_refused_before_the_model_is_looked_up(tmp_path) -> None:
    """As a bad device is: the dtype is one line before a hub id is fetched or a folder read."""
    with pytest.raises(InvalidInputError, match="cannot run a model here"):
        Engine(tmp_path / "no-such-model", device="cpu", dtype=torch.int8)
