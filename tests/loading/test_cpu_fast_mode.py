"""CPU speed-ups: pre-packed fp32 linears are exact; the opt-in fast mode's cost is measured.

Fast-mode arithmetic differs by instruction set, so these tests check the contract on whatever CPU
runs them (active and at least as close as the bar, or fallen back to outputs equal to fp32),
never a cosine measured on one CPU.
"""

from __future__ import annotations

import copy
import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from poolrag import Engine
from poolrag.errors import InvalidInputError
from poolrag.loading.cpu_fast_mode import (
    DEFAULT_MIN_COSINE,
    FastModeReport,
    PackedLinear,
    describe_isa,
    enable_cpu_fast_mode,
    pack_linear_weights,
)
from poolrag.models.fused_linear import FusedLinear
from poolrag.models.int8_linear import SmoothQuantLinear, int8_activation_levels
from poolrag.testing import engine_internals as internals

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


def _model(engine: Engine) -> nn.Module:
    return internals.loaded_module(engine)


def _assert_contract(engine: Engine, exact: np.ndarray, mode: str, bar: float = DEFAULT_MIN_COSINE) -> None:
    """Active and at least as close to fp32 as the bar, or fallen back to fp32 itself."""
    report = engine.fast_mode_report
    assert report is not None and report.mode == mode and report.min_cosine_required == bar
    assert report.isa.startswith(torch.backends.cpu.get_cpu_capability()) and report.reason
    fast = engine.embed_array(TEXTS)
    if report.active:
        assert bar <= report.min_cosine <= report.mean_cosine <= 1.0 + 1e-6
        assert not np.array_equal(exact, fast)  # it really runs the fast arithmetic
    else:
        assert report.min_cosine < bar and f"< {bar}" in report.reason
        np.testing.assert_array_equal(fast, exact)


@pytest.fixture(scope="module")
def exact_minilm(minilm_path: Path) -> dict[str, np.ndarray]:
    """fp32 outputs per ``model_impl`` (native and transformers differ by summation order)."""
    impls = ("auto", "transformers")
    return {impl: Engine(minilm_path, model_impl=impl).embed_array(TEXTS) for impl in impls}


@pytest.mark.parametrize(
    ("mode", "model_impl"), [("bf16", "auto"), ("int8", "auto"), ("int8", "transformers")]
)
def test_fast_modes_are_accurate_or_fall_back_to_fp32(
    minilm_path: Path, exact_minilm: dict[str, np.ndarray], mode: str, model_impl: str
) -> None:
    engine = Engine(minilm_path, cpu_fast_mode=mode, model_impl=model_impl)
    exact = exact_minilm[model_impl]
    _assert_contract(engine, exact, mode)
    report = engine.fast_mode_report
    assert report is not None
    if report.active:  # the bar holds beyond the probe texts it was measured on
        assert (exact * engine.embed_array(TEXTS)).sum(axis=1).min() >= DEFAULT_MIN_COSINE


@pytest.mark.parametrize(
    ("mode", "model_impl"), [("bf16", "auto"), ("int8", "auto"), ("int8", "transformers")]
)
def test_below_the_bar_the_engine_is_exactly_the_fp32_one(
    minilm_path: Path,
    exact_minilm: dict[str, np.ndarray],
    mode: str,
    model_impl: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bar no fast arithmetic can reach (identical vectors) forces the fallback on any CPU: same
    outputs, same modules, oneDNN-packed as usual, and the log says why."""
    with caplog.at_level(logging.WARNING, logger="poolrag.loading.cpu_fast_mode"):
        engine = Engine(minilm_path, cpu_fast_mode=mode, cpu_fast_mode_min_cosine=1.0, model_impl=model_impl)
    _assert_contract(engine, exact_minilm[model_impl], mode, bar=1.0)
    report = engine.fast_mode_report
    assert report is not None and not report.active
    model = _model(engine)
    assert not any(
        isinstance(m, SmoothQuantLinear) or "quantized" in type(m).__module__ for m in model.modules()
    )
    assert all(p.dtype == torch.float32 for p in model.parameters())
    # packed once serving started, as without fast mode
    assert all(m.packed_weight is not None for m in model.modules() if isinstance(m, FusedLinear))
    reference = Engine(minilm_path, model_impl=model_impl)
    reference.embed_array(TEXTS[:1])
    assert [type(m) for m in model.modules()] == [type(m) for m in _model(reference).modules()]
    (message,) = [r.getMessage() for r in caplog.records if "falls back to exact fp32" in r.getMessage()]
    assert describe_isa() in message and "< 1.0" in message and f"{report.min_cosine:.6f}" in message


def test_a_bar_of_zero_keeps_any_fast_mode(minilm_path: Path) -> None:
    """Dynamic int8 (one scale per tensor) on transformers modules is far from fp32 on this model;
    a caller who accepts that gets it."""
    engine = Engine(
        minilm_path, cpu_fast_mode="int8", cpu_fast_mode_min_cosine=0.0, model_impl="transformers"
    )
    model = _model(engine)
    assert any(type(m).__module__.startswith("torch.ao.nn.quantized.dynamic") for m in model.modules())
    assert not any(isinstance(m, SmoothQuantLinear) for m in model.modules())
    report = engine.fast_mode_report
    assert report is not None and report.active and 0.0 < report.min_cosine < 1.0


@pytest.mark.skipif(int8_activation_levels() is None, reason="this PyTorch build has no oneDNN int8 matmul")
def test_int8_on_a_native_encoder_is_smoothquant(minilm_path: Path) -> None:
    engine = Engine(minilm_path, cpu_fast_mode="int8", cpu_fast_mode_min_cosine=0.0)
    assert any(isinstance(m, SmoothQuantLinear) for m in _model(engine).modules())


def test_a_nan_bar_is_a_clear_error(minilm_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="min_cosine"):
        Engine(minilm_path, cpu_fast_mode="int8", cpu_fast_mode_min_cosine=float("nan"))


def test_unknown_fast_mode_is_a_clear_error(minilm_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cpu_fast_mode"):
        Engine(minilm_path, cpu_fast_mode="fp8")


@pytest.mark.parametrize(("mode", "dtype"), [("bf16", "bfloat16"), ("bf16", "float16"), ("int8", "bfloat16")])
def test_a_fast_mode_takes_the_fp32_model_only(minilm_path: Path, mode: str, dtype: str) -> None:
    """Measured against fp32 and falling back to it: on a bf16 engine "cosine to fp32" compared bf16
    with itself, on fp16 bf16 ran while ``engine.dtype`` said float16, and int8 failed in the first
    matmul (``mixed dtype (CPU)``). One line instead, naming the dtype to pass."""
    with pytest.raises(InvalidInputError, match=rf"cpu_fast_mode='{mode}' .* dtype='auto' or 'float32'"):
        Engine(minilm_path, device="cpu", dtype=dtype, cpu_fast_mode=mode).embed(TEXTS[:1])


def test_fast_mode_is_for_cpu_engines_only() -> None:
    class GpuRunner:
        device = torch.device("cuda")

    with pytest.raises(InvalidInputError, match="CPU"):
        enable_cpu_fast_mode(GpuRunner(), "bf16", [])


@pytest.mark.parametrize("measured", [0.9993, 0.99995, 0.999, 0.998])
def test_a_compiled_fast_model_may_use_only_the_angle_its_measurement_leaves(measured: float) -> None:
    """Compiled-to-eager agreement at ``compiled_min_cosine`` plus eager's measured cosine to fp32
    keeps the bar by the triangle inequality on angles; at or below the bar nothing is left."""
    report = FastModeReport("int8", measured, measured, True, measured >= 0.999, min_cosine_required=0.999)
    allowed = report.compiled_min_cosine()
    assert 0.999 <= allowed <= 1.0  # never looser than the bar itself
    worst = math.cos(math.acos(allowed) + math.acos(measured))
    if measured > 0.999:
        assert worst == pytest.approx(0.999, abs=1e-12)
    else:
        assert allowed == 1.0
