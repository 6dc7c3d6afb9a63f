"""Which models run natively: exact matches only; everything else goes through transformers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from poolrag import Engine
from poolrag.config.model_spec import load_model_spec
from poolrag.config.network_head import NetworkHead
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.loading.native_loader import unsupported_reason
from poolrag.loading.placement import Placement
from poolrag.models.bert import BertFamilyModel
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import SENTENCES


def _is_native(engine: Engine) -> bool:
    return isinstance(internals.loaded_module(engine), BertFamilyModel)


def _copy_without_weights(source: Path, dest: Path) -> Path:
    dest.mkdir()
    for item in source.iterdir():
        if item.suffix != ".safetensors":
            (dest / item.name).write_bytes(item.read_bytes())
    return dest


@pytest.mark.parametrize("arch", ["bert", "roberta", "xlm-roberta"])
def test_supported_families_run_natively_by_default(tiny_model: Callable[..., Path], arch: str) -> None:
    assert _is_native(Engine(tiny_model(arch)))


def test_other_families_run_through_transformers(tiny_model: Callable[..., Path]) -> None:
    folder = tiny_model("distilbert")
    assert not _is_native(Engine(folder))
    with pytest.raises(ModelLoadError, match="no native implementation of 'distilbert'"):
        Engine(folder, model_impl="native")


def test_an_inexact_activation_falls_back(tiny_model: Callable[..., Path]) -> None:
    """tanh-approximated GELU is a different function: the native path would not be exact."""
    folder = tiny_model("bert", hidden_act="gelu_new")
    engine = Engine(folder)
    assert not _is_native(engine)
    assert engine.embed_array(SENTENCES).shape == (len(SENTENCES), 32)
    with pytest.raises(ModelLoadError, match="activation 'gelu_new'"):
        Engine(folder, model_impl="native")


def test_model_impl_transformers_is_honoured(tiny_model: Callable[..., Path]) -> None:
    assert not _is_native(Engine(tiny_model("bert"), model_impl="transformers"))


def test_unknown_model_impl_is_refused(tiny_model: Callable[..., Path]) -> None:
    with pytest.raises(InvalidInputError, match="model_impl must be one of auto, native, transformers"):
        Engine(tiny_model("bert"), model_impl="fast")  # type: ignore[arg-type]


def test_pytorch_bin_checkpoints_fall_back(tiny_model: Callable[..., Path], tmp_path: Path) -> None:
    source = tiny_model("bert")
    folder = _copy_without_weights(source, tmp_path / "bin")
    torch.save(load_file(str(source / "model.safetensors")), folder / "pytorch_model.bin")
    assert not _is_native(Engine(folder))
    with pytest.raises(ModelLoadError, match="no safetensors weights"):
        Engine(folder, model_impl="native")


def test_a_checkpoint_missing_tensors_is_refused_natively(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    source = tiny_model("bert", "sequence")
    folder = _copy_without_weights(source, tmp_path / "headless")
    state = {
        k: v
        for k, v in load_file(str(source / "model.safetensors")).items()
        if not k.startswith("classifier")
    }
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"lacks 2 tensors the model needs.*head\.out"):
        Engine(folder, model_impl="native")


def test_placement_and_remote_code_are_left_to_transformers(tiny_model: Callable[..., Path]) -> None:
    spec = load_model_spec(tiny_model("bert"), None, False)
    assert unsupported_reason(spec, NetworkHead.NONE, Placement()) is None
    assert "device_map" in str(unsupported_reason(spec, NetworkHead.NONE, Placement(device_map="auto")))
    assert "device_map" in str(unsupported_reason(spec, NetworkHead.NONE, Placement(quantization="int8")))
    spec.hf_config.auto_map = {"AutoModel": "modeling_custom.CustomModel"}
    assert "its own modelling code" in str(unsupported_reason(spec, NetworkHead.NONE, Placement()))
