"""A fused linear layer computes exactly what its unfused composition does."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from poolrag.models.fused_linear import FusedLinear, bucket_padding, onednn_available


def _pair(activation: str, dtype: torch.dtype = torch.float32) -> tuple[FusedLinear, FusedLinear]:
    torch.manual_seed(0)
    plain = FusedLinear(48, 40, activation).to(dtype)  # type: ignore[arg-type]
    packed = FusedLinear(48, 40, activation).to(dtype)  # type: ignore[arg-type]
    packed.load_state_dict(plain.state_dict())
    assert packed.pack()
    return plain, packed


def test_onednn_is_available_on_this_cpu() -> None:
    assert onednn_available(torch.float32)


@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_packed_equals_plain(activation: str) -> None:
    plain, packed = _pair(activation)
    x = torch.randn(37, 48)
    want = plain.linear(x) if activation == "none" else F.gelu(plain.linear(x))
    torch.testing.assert_close(plain(x), want, rtol=0, atol=0)
    torch.testing.assert_close(packed(x), want, rtol=0, atol=1e-5)


def test_residual_add_is_fused() -> None:
    plain, packed = _pair("none")
    x, residual = torch.randn(37, 48), torch.randn(37, 40)
    torch.testing.assert_close(packed(x, residual), plain.linear(x) + residual, rtol=0, atol=1e-5)


def test_packing_drops_the_unpacked_weight() -> None:
    _, packed = _pair("gelu")
    assert packed.linear.weight.numel() == 0 and packed.packed_weight is not None


@pytest.mark.skipif(not onednn_available(torch.bfloat16), reason="this CPU has no oneDNN bf16")
def test_bf16_packed_is_close_to_bf16_plain() -> None:
    plain, packed = _pair("gelu", torch.bfloat16)
    x = torch.randn(37, 48, dtype=torch.bfloat16)
    torch.testing.assert_close(packed(x).float(), plain(x).float(), rtol=2e-2, atol=2e-2)


def test_quantised_layers_stay_unpacked_and_run() -> None:
    """cpu_fast_mode='int8' swaps the inner nn.Linear for a dynamic-quantised one: no oneDNN packing."""
    from torch.ao.quantization import quantize_dynamic

    layer = quantize_dynamic(FusedLinear(48, 40, "gelu"), {nn.Linear}, dtype=torch.qint8)
    assert not layer.pack()
    assert layer(torch.randn(5, 48)).shape == (5, 40)


def test_small_batches_are_bucketed_by_32_rows_and_large_ones_left_alone() -> None:
    for rows in (1, 5, 31, 32, 33, 200, 1000, 1024):
        padded = rows + bucket_padding(rows)
        assert padded % 32 == 0 and 0 <= padded - rows < 32
    assert all(bucket_padding(rows) == 0 for rows in (1025, 4000, 16_383))
