"""A linear layer that can fold its activation and the residual add into the matmul.

On the CPU the weight is reordered once into oneDNN's blocked layout and the GELU or the
residual add run as oneDNN post-ops inside the same kernel, so the activations are written to
memory once instead of three times. Elsewhere (CUDA, int8-quantised layers) it is the plain
composition, which is the reference the fused path is tested against.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

Activation = Literal["none", "gelu"]
#: packed batches of up to BUCKETED_ROWS rows are padded to a multiple of ROW_BUCKET (bucket_padding)
ROW_BUCKET = 32
BUCKETED_ROWS = 1024


class FusedLinear(nn.Module):
    """``activation(x @ W.T + b) (+ residual)``, one kernel on CPU once :meth:`pack` has run.

    Packing is the last step before serving: it empties ``linear.weight``, so ``state_dict()`` and
    ``.to()`` no longer describe the layer afterwards.
    """

    def __init__(self, in_features: int, out_features: int, activation: Activation = "none") -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.activation: Activation = activation
        self.packed_weight: torch.Tensor | None = None

    def pack(self, batch_hint: int = 1024) -> bool:
        """Reorder the weight for oneDNN (CPU, fp32/bf16, plain ``nn.Linear``); returns whether it did."""
        if self.packed_weight is not None:
            return True
        linear = self.linear
        if type(linear) is not nn.Linear or linear.weight.device.type != "cpu":
            return False
        if linear.weight.dtype not in (torch.float32, torch.bfloat16):
            return False
        weight = linear.weight.detach()
        self.packed_weight = torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)
        linear.weight = nn.Parameter(torch.empty(0, dtype=weight.dtype), requires_grad=False)
        return True

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed_weight is not None:
            bias = self.linear.bias
            if residual is not None:
                assert self.activation == "none"
                return torch.ops.mkldnn._linear_pointwise.binary(x, residual, self.packed_weight, bias, "add")
            if self.activation == "gelu":
                return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, bias, "gelu", [], "none")
            return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, bias, "none", [], "")
        y = self.linear(x)
        if self.activation == "gelu":
            y = F.gelu(y)
        return y if residual is None else y + residual


def bucket_padding(rows: int) -> int:
    """Rows to add so a packed batch of ``rows`` rows has a bucketed row count.

    oneDNN compiles one primitive per matmul shape, and the row count is the shape's free
    dimension: every text length a server sees would be a primitive compiled anew (~0.4 ms per
    linear on a 2-core EPYC, ten times the matmul of a short text) once the CLI's bounded cache
    (64 entries) overflows. Up to :data:`BUCKETED_ROWS` rows the count is rounded up to a multiple
    of 32, so one-text requests fall on a few shapes; a larger batch's matmuls take long enough
    for a compile not to matter, and are left as they are."""
    return -rows % ROW_BUCKET if rows <= BUCKETED_ROWS else 0


@cache
def onednn_available(dtype: torch.dtype) -> bool:
    """Whether this PyTorch build can run packed oneDNN linears in ``dtype`` on this CPU."""
    if dtype not in (torch.float32, torch.bfloat16) or not torch.backends.mkldnn.is_available():
        return False
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return False
    try:
        with torch.random.fork_rng(devices=[]):  # initialising the probe must not move the caller's RNG
            probe = FusedLinear(8, 8, "gelu").to(dtype)
        probe.pack()
        probe(torch.zeros(2, 8, dtype=dtype))
        probe.activation = "none"
        probe(torch.zeros(2, 8, dtype=dtype), torch.zeros(2, 8, dtype=dtype))
    except (RuntimeError, AttributeError):
        return False
    return True
