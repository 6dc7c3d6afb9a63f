"""The kernels inductor must not re-lower: oneDNN's pre-packed linears (fp32/bf16, and the u8×s8
matmul of ``cpu_fast_mode="int8"``) and poolrag's packed attention, registered as opaque custom ops.

Inductor lowers ``mkldnn._linear_pointwise`` only for weights it froze itself (and fails on the int8
matmul's weight, prepacked at load, with an assertion), and packed attention branches on the
batch's lengths (runs of equal length, or padded groups of neighbouring lengths) in Python. As
custom ops both run exactly their eager kernels; the graph around them (embeddings, LayerNorms,
the residual and reshapes) is what inductor fuses, and the graph stays one graph for every batch
shape.
"""

from __future__ import annotations

import threading

import torch
from torch import nn

from poolrag.models.int8_linear import u8s8_matmul
from poolrag.models.packed_attention import AttentionLayout, packed_self_attention

_ACTIVATIONS = ("none", "gelu")


@torch.library.custom_op("poolrag::onednn_linear", mutates_args=())
def onednn_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    activation: str,
) -> torch.Tensor:
    """``activation(x @ W.T + b) (+ residual)`` on a oneDNN-packed ``weight`` (2-D ``x``)."""
    if residual is not None:
        return torch.ops.mkldnn._linear_pointwise.binary(x, residual, weight, bias, "add")
    return torch.ops.mkldnn._linear_pointwise(
        x, weight, bias, activation, [], "none" if activation != "none" else ""
    )


@onednn_linear.register_fake
def _onednn_linear_shape(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    activation: str,
) -> torch.Tensor:
    return x.new_empty(x.shape[0], weight.shape[0])


@torch.library.custom_op("poolrag::onednn_u8s8_linear", mutates_args=())
def onednn_u8s8_linear(
    quantized: torch.Tensor,
    zero_point: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    weight_zero: torch.Tensor,
) -> torch.Tensor:
    """:func:`~poolrag.models.int8_linear.u8s8_matmul`: the quantise and dequantise steps around it
    stay in the graph, where inductor fuses each into one pass over the rows."""
    return u8s8_matmul(quantized, zero_point, weight, weight_scale, weight_zero)


@onednn_u8s8_linear.register_fake
def _onednn_u8s8_linear_shape(
    quantized: torch.Tensor,
    zero_point: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    weight_zero: torch.Tensor,
) -> torch.Tensor:
    return quantized.new_empty(quantized.shape[0], weight_scale.shape[0], dtype=torch.float32)


class _LayoutMemo(threading.local):
    """The last batch's layout, so the layers of one forward pass build it once (per thread)."""

    cu: torch.Tensor | None = None
    version: int = -1
    layout: AttentionLayout | None = None


_memo = _LayoutMemo()


def _layout(cu_seqlens: torch.Tensor) -> AttentionLayout:
    if _memo.cu is not cu_seqlens or _memo.version != cu_seqlens._version or _memo.layout is None:
        _memo.cu, _memo.version = cu_seqlens, cu_seqlens._version
        _memo.layout = AttentionLayout.from_lengths(cu_seqlens.diff())
    return _memo.layout


@torch.library.custom_op("poolrag::packed_attention", mutates_args=())
def packed_attention(qkv: torch.Tensor, cu_seqlens: torch.Tensor, heads: int) -> torch.Tensor:
    """:func:`packed_self_attention` on ``[T, 3H]`` rows of sequences bounded by ``cu_seqlens``."""
    return packed_self_attention(qkv, _layout(cu_seqlens), heads)


@packed_attention.register_fake
def _packed_attention_shape(qkv: torch.Tensor, cu_seqlens: torch.Tensor, heads: int) -> torch.Tensor:
    return qkv.new_empty(qkv.shape[0], qkv.shape[1] // 3)


def linear(
    weight: torch.Tensor | None,
    plain: nn.Linear,
    x: torch.Tensor,
    residual: torch.Tensor | None = None,
    activation: str = "none",
) -> torch.Tensor:
    """One linear layer for the compiled graph: the opaque oneDNN op on a packed ``weight``, else
    the plain composition (which inductor may fuse)."""
    assert activation in _ACTIVATIONS
    if weight is not None:
        flat = x.reshape(-1, x.shape[-1])
        flat_residual = None if residual is None else residual.reshape(-1, residual.shape[-1])
        out = onednn_linear(flat, weight, plain.bias, flat_residual, activation)
        return out.reshape(*x.shape[:-1], weight.shape[0])
    y = plain(x)
    if activation == "gelu":
        y = torch.nn.functional.gelu(y)
    return y if residual is None else y + residual
