"""SmoothQuant int8 layers stay close to the fp32 layer they replace, outliers included, with
whichever activation width this CPU's int8 kernel computes exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from poolrag import Engine
from poolrag.models.fused_linear import FusedLinear
from poolrag.models.int8_linear import (
    FULL_LEVELS,
    SEVEN_BIT_LEVELS,
    SmoothQuantLinear,
    _int8_matmul_is_exact,
    int8_activation_levels,
    recording_input_absmax,
    smooth_quantize,
)
from poolrag.testing import engine_internals as internals

pytestmark = pytest.mark.skipif(
    int8_activation_levels() is None, reason="this PyTorch build has no oneDNN int8 matmul"
)


def _layer(activation: str = "none") -> FusedLinear:
    torch.manual_seed(0)
    return FusedLinear(64, 48, activation)  # type: ignore[arg-type]


def _with_outliers(rows: int = 50) -> torch.Tensor:
    """Activations like a transformer's: two hidden channels 60x larger than the rest."""
    x = torch.randn(rows, 64)
    x[:, [5, 17]] *= 60
    return x


def _min_cosine(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(F.cosine_similarity(got, want, dim=-1).min())


def test_the_chosen_activation_width_is_exact_and_7_bits_always_are() -> None:
    """Full-range u8 may saturate int16 pair sums (AVX2, AVX-512 without VNNI); 7 bits never do."""
    levels = int8_activation_levels()
    assert levels in (FULL_LEVELS, SEVEN_BIT_LEVELS)
    assert _int8_matmul_is_exact(levels) and _int8_matmul_is_exact(SEVEN_BIT_LEVELS)
    assert SmoothQuantLinear(_layer(), torch.ones(64)).levels == levels


@pytest.mark.parametrize("levels", [None, SEVEN_BIT_LEVELS])
@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_int8_layer_stays_within_cosine_0_999_of_fp32(activation: str, levels: int | None) -> None:
    layer, x = _layer(activation), _with_outliers()
    quantized = SmoothQuantLinear(layer, x.abs().amax(0), levels=levels)
    with torch.inference_mode():
        assert _min_cosine(quantized(x), layer(x)) >= 0.999
        assert not torch.equal(quantized(x), layer(x))  # really int8


def test_smoothing_is_what_tames_the_outliers() -> None:
    """alpha=1 with a flat calibration is plain per-token int8: the outlier channels then set every
    row's scale and the small channels round to nothing."""
    layer, x = _layer(), _with_outliers()
    with torch.inference_mode():
        smoothed = SmoothQuantLinear(layer, x.abs().amax(0))(x)
        unsmoothed = SmoothQuantLinear(layer, torch.ones(64), alpha=1.0)(x)
        want = layer(x)
    assert (smoothed - want).abs().max() < 0.5 * (unsmoothed - want).abs().max()


def test_residual_is_added_after_the_int8_matmul() -> None:
    layer, x, residual = _layer(), _with_outliers(), torch.randn(50, 48)
    quantized = SmoothQuantLinear(layer, x.abs().amax(0))
    with torch.inference_mode():
        torch.testing.assert_close(quantized(x, residual), quantized(x) + residual, rtol=0, atol=1e-5)


def test_a_packed_layer_cannot_be_quantised() -> None:
    layer = _layer()
    assert layer.pack()
    with pytest.raises(ValueError, match="already packed"):
        SmoothQuantLinear(layer, torch.ones(64))


def test_calibration_keeps_the_largest_input_per_channel_and_leaves_no_hooks() -> None:
    layer = _layer()
    first, second = torch.randn(4, 64), torch.randn(9, 64) * 3
    with recording_input_absmax(layer) as absmax, torch.inference_mode():
        layer(first)
        layer(second)
    torch.testing.assert_close(absmax[""], torch.cat([first, second]).abs().amax(0))
    layer(torch.full((1, 64), 1e6))
    torch.testing.assert_close(absmax[""], torch.cat([first, second]).abs().amax(0))  # no longer recording


def test_attention_matmuls_go_int8_but_the_feed_forward_and_head_stay_fp32(
    tiny_model: Callable[..., Path],
) -> None:
    engine = Engine(
        tiny_model("bert", "sequence"),
        model_impl="native",
        cpu_fast_mode="int8",
        cpu_fast_mode_min_cosine=0.0,
    )
    model = internals.loaded_module(engine)
    layers = list(model.layers)
    for name in ("qkv", "attn_out"):
        assert all(isinstance(getattr(layer, name), SmoothQuantLinear) for layer in layers)
    for name in ("up", "down"):
        assert all(type(getattr(layer, name)) is FusedLinear for layer in layers)
    assert type(model.head.dense) is FusedLinear
    report = engine.fast_mode_report
    assert report is not None and report.mode == "int8" and report.active and report.min_cosine >= 0.99


def test_smooth_quantize_only_touches_recorded_layers(tiny_model: Callable[..., Path]) -> None:
    engine = Engine(tiny_model("bert"), model_impl="native")
    model = internals.loaded_module(engine)
    assert smooth_quantize(model, {}) == 0
    assert not any(isinstance(m, SmoothQuantLinear) for m in model.modules())


def test_the_capability_probes_leave_the_callers_random_state_alone() -> None:
    from poolrag.models.fused_linear import onednn_available

    torch.manual_seed(1)
    want = torch.rand(3)
    torch.manual_seed(1)
    assert int8_activation_levels.__wrapped__() and onednn_available.__wrapped__(torch.float32)
    torch.testing.assert_close(torch.rand(3), want, rtol=0, atol=0)
