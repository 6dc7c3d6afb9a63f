"""CPU speed-ups: pre-packed fp32 linears are exact; the opt-in fast mode's cost is measured."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from poolrag import Engine
from poolrag.errors import InvalidInputError
from poolrag.loading.cpu_fast_mode import (
    PROBE_TEXTS,
    PackedLinear,
    enable_cpu_fast_mode,
    has_native_bf16,
    pack_linear_weights,
)
from poolrag.models.int8_linear import SmoothQuantLinear, int8_available

TEXTS = [
    "What is the boiling point of water at high altitude?",
    "Embeddings place related texts close together in vector space.",
    "The tribunal found the contract void because one party lacked capacity when signing it, "
    "and ordered restitution of the sums already paid under it.",
    "cheap flights to lisbon",
    "Mitochondria produce most of the chemical energy needed by the cell.",
]


def test_packed_linear_matches_nn_linear() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(48, 80)
    packed = PackedLinear(linear)
    x = torch.randn(3, 7, 48)
    with torch.inference_mode():
        torch.testing.assert_close(packed(x), linear(x), rtol=1e-5, atol=1e-5)
        assert packed(x).shape == (3, 7, 80)


def test_packing_a_model_keeps_its_outputs(minilm_path: Path) -> None:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(minilm_path).eval()
    packed = pack_linear_weights(copy.deepcopy(model))
    assert any(isinstance(m, PackedLinear) for m in packed.modules())
    assert not any(type(m) is nn.Linear for m in packed.modules())
    ids = torch.tensor([[101, 2054, 2003, 1037, 3231, 102]])
    with torch.inference_mode():
        torch.testing.assert_close(
            packed(input_ids=ids).last_hidden_state, model(input_ids=ids).last_hidden_state, rtol=0, atol=1e-5
        )


def test_default_cpu_engine_is_exact_fp32(minilm_path: Path) -> None:
    """The default path stays within fp32 rounding of sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    ours = Engine(minilm_path).embed_array(TEXTS)
    reference = SentenceTransformer(str(minilm_path), device="cpu").encode(TEXTS)
    assert np.abs(ours - reference).max() < 1e-5
    assert (ours * reference).sum(axis=1).min() >= 0.99999


@pytest.mark.skipif(not has_native_bf16(), reason="bf16 fast mode needs AVX512-BF16 or AMX")
def test_bf16_fast_mode_stays_within_cosine_0_999_of_fp32(minilm_path: Path) -> None:
    exact = Engine(minilm_path).embed_array(TEXTS)
    fast_engine = Engine(minilm_path, cpu_fast_mode="bf16")
    fast = fast_engine.embed_array(TEXTS)
    cosine = (exact * fast).sum(axis=1)  # both normalised
    assert cosine.min() >= 0.999
    assert not np.array_equal(exact, fast)  # it really runs in bf16
    report = fast_engine.fast_mode_report
    assert report is not None and report.mode == "bf16" and report.native
    assert 0.999 <= report.min_cosine <= report.mean_cosine <= 1.0 + 1e-6


def test_int8_fast_mode_reports_its_accuracy_cost(minilm_path: Path) -> None:
    engine = Engine(minilm_path, cpu_fast_mode="int8")
    report = engine.fast_mode_report
    assert report is not None and report.mode == "int8"
    assert 0.0 < report.min_cosine <= report.mean_cosine < 1.0  # measured, and not free
    exact = Engine(minilm_path).embed_array(list(PROBE_TEXTS))
    fast = engine.embed_array(list(PROBE_TEXTS))
    assert (exact * fast).sum(axis=1).min() < 0.9999  # outputs do change


@pytest.mark.skipif(not int8_available(), reason="this PyTorch build has no oneDNN int8 matmul")
def test_int8_on_a_native_encoder_is_smoothquant_and_stays_close(minilm_path: Path) -> None:
    """Calibrated on the six probe texts, it holds on texts it never saw (dynamic one-scale-per-tensor
    int8 measured cosine 0.92 on this model)."""
    engine = Engine(minilm_path, cpu_fast_mode="int8")
    assert any(isinstance(m, SmoothQuantLinear) for m in engine._pipeline.executor.runner.model.modules())
    cosine = (Engine(minilm_path).embed_array(TEXTS) * engine.embed_array(TEXTS)).sum(axis=1)
    assert cosine.min() >= 0.999


def test_int8_on_transformers_modules_is_dynamic_quantisation(minilm_path: Path) -> None:
    engine = Engine(minilm_path, cpu_fast_mode="int8", model_impl="transformers")
    model = engine._pipeline.executor.runner.model
    assert any(type(m).__module__.startswith("torch.ao.nn.quantized.dynamic") for m in model.modules())
    assert not any(isinstance(m, SmoothQuantLinear) for m in model.modules())
    report = engine.fast_mode_report
    assert report is not None and 0.0 < report.min_cosine < 1.0


def test_unknown_fast_mode_is_a_clear_error(minilm_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cpu_fast_mode"):
        Engine(minilm_path, cpu_fast_mode="fp8")


def test_fast_mode_is_for_cpu_engines_only() -> None:
    class GpuRunner:
        device = torch.device("cuda")

    with pytest.raises(InvalidInputError, match="CPU"):
        enable_cpu_fast_mode(GpuRunner(), "bf16", [])
