"""Which device and dtype an engine runs with: a device this process cannot reach is one line naming
it, before any weights load (on any machine: each case below is unreachable wherever it runs)."""

from __future__ import annotations

import pytest
import torch

from poolrag import Engine, InvalidInputError
from poolrag.loading.dtype import resolve_device


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
