"""Issue 30, item 7: "FP8 (`--quantization fp8`, the seed's best practice on GPUs) is unknown".

``fp8`` is a known scheme now: float8 weights through torchao on CUDA, and on any other device a
one-line refusal at load (no GPU here: the CUDA path is exercised by tests/engine/test_cuda.py's
machines, not by this file). A checkpoint saved quantized by another library (a
``quantization_config`` in its config.json) loads through that library or not at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from poolrag import Engine
from poolrag.cli import build_parser
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.loading.quantization import QUANTIZATION_SCHEMES, quantization_config


def test_fp8_is_refused_on_the_cpu_in_one_line(tiny_model) -> None:
    with pytest.raises(ModelLoadError, match=r"quantization='fp8' needs a CUDA GPU .*not cpu") as caught:
        Engine(tiny_model("bert"), quantization="fp8", device="cpu")
    assert "\n" not in str(caught.value)


def test_an_unknown_scheme_names_the_ones_there_are(tiny_model) -> None:
    assert QUANTIZATION_SCHEMES == ("int8", "fp8")
    with pytest.raises(InvalidInputError, match="quantization must be one of int8, fp8, not 'fp4'"):
        Engine(tiny_model("bert"), quantization="fp4", device="cpu")


def test_fp8_on_cuda_is_torchaos_float8_weight_only_config() -> None:
    from torchao.quantization import Float8WeightOnlyConfig

    config = quantization_config("fp8", torch.device("cuda"))  # building the config needs no GPU
    assert isinstance(config.quant_type, Float8WeightOnlyConfig)


def test_serve_accepts_quantization_fp8() -> None:
    args = build_parser().parse_args(["serve", "some/model", "--quantization", "fp8"])
    assert args.quantization == "fp8"


def _saved_quantized(source: Path, dest: Path, method: str) -> Path:
    """``source``'s tiny BERT as its quantizer saves it: every layer's Linear weight stored as
    compressed-tensors' per-channel float8 (``weight_scale`` beside it) or bitsandbytes' LLM.int8
    rows (``SCB`` beside it), and the ``quantization_config`` that names the format."""
    shutil.copytree(source, dest)
    state = load_file(str(dest / "model.safetensors"))
    for key in [
        k for k in state if k.startswith("encoder.") and k.endswith(".weight") and state[k].dim() == 2
    ]:
        weight, stem = state[key], key.removesuffix("weight")
        absmax = weight.abs().amax(dim=1, keepdim=True)
        if method == "compressed-tensors":
            state[key] = (weight / (absmax / 448)).to(torch.float8_e4m3fn)
            state[stem + "weight_scale"] = absmax / 448
        else:
            state[key] = torch.round(weight / absmax * 127).to(torch.int8)
            state[stem + "SCB"] = absmax.squeeze(1)
    save_file(state, str(dest / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((dest / "config.json").read_text())
    config["quantization_config"] = _SAVED_CONFIGS[method]
    (dest / "config.json").write_text(json.dumps(config))
    return dest


_SAVED_CONFIGS = {
    "compressed-tensors": {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
            }
        },
    },
    "bitsandbytes": {"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_threshold": 6.0},
}


@pytest.mark.parametrize("method", sorted(_SAVED_CONFIGS))
@pytest.mark.parametrize("model_impl", ["auto", "transformers"])
def test_a_checkpoint_saved_quantized_is_never_read_as_plain_weights(
    tiny_model, tmp_path: Path, method: str, model_impl: str
) -> None:
    """Cast to float, float8 or int8 values without their scales are other weights: the native
    encoder ran them (every vector off, cosine ~0.2 to the model's), silently. Now the format's
    library is what loads them; without it (none installed here) the load names it, in one line."""
    folder = _saved_quantized(tiny_model("bert"), tmp_path / method, method)
    with pytest.raises(ModelLoadError, match=rf"install.*saved {method}-quantized") as caught:
        Engine(folder, device="cpu", model_impl=model_impl, tune="off")
    assert "\n" not in str(caught.value)


def test_quantization_on_a_checkpoint_saved_quantized_is_refused(tiny_model, tmp_path: Path) -> None:
    folder = _saved_quantized(tiny_model("bert"), tmp_path / "bnb", "bitsandbytes")
    with pytest.raises(ModelLoadError, match="saved bitsandbytes-quantized already; load it without"):
        Engine(folder, device="cpu", quantization="int8", tune="off")


def test_the_native_encoder_refuses_quantized_tensors_a_config_does_not_declare(
    tiny_model, tmp_path: Path
) -> None:
    folder = _saved_quantized(tiny_model("bert"), tmp_path / "undeclared", "bitsandbytes")
    config = json.loads((folder / "config.json").read_text())
    del config["quantization_config"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"encoder\.layer\.0\.\S+\.weight is stored as torch\.int8"):
        Engine(folder, device="cpu", model_impl="native", tune="off")


def test_the_native_encoder_leaves_a_checkpoint_saved_quantized_to_transformers(
    tiny_model, tmp_path: Path
) -> None:
    from poolrag.config.model_spec import load_model_spec
    from poolrag.config.network_head import NetworkHead
    from poolrag.loading.native_loader import unsupported_reason
    from poolrag.loading.placement import Placement

    folder = _saved_quantized(tiny_model("bert"), tmp_path / "fp8", "compressed-tensors")
    spec = load_model_spec(folder, None, trust_remote_code=False)
    reason = unsupported_reason(spec, NetworkHead.NONE, Placement())
    assert reason == "the checkpoint is saved compressed-tensors-quantized (config.json quantization_config)"
