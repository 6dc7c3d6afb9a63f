"""Issue 30, item 7: "FP8 (`--quantization fp8`, the seed's best practice on GPUs) is unknown".

``fp8`` is a known scheme now: float8 weights through torchao on CUDA, and on any other device a
one-line refusal at load (no GPU here: the CUDA path is exercised by tests/engine/test_cuda.py's
machines, not by this file)."""

from __future__ import annotations

import pytest
import torch

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
