"""SmoothQuant int8 matmuls for the native encoders' CPU fast mode (``cpu_fast_mode="int8"``).

Why this recipe: int8 with one activation scale per tensor (torch.ao's ``quantize_dynamic``)
measured cosine 0.92 to fp32 on all-MiniLM-L6-v2, because a few hidden channels carry activations
far larger than the rest. Two measures recover most of it:

* **SmoothQuant**: input channel ``j`` is divided by ``s_j = max|X_j|^α / max|W_j|^(1-α)`` and the
  weight's column ``j`` multiplied by it, which moves the outliers into the weights, where one
  scale per output channel absorbs them (``max|X_j|`` is recorded on the probe texts);
* **one scale per token** for the activations, found at run time.

The matmul is oneDNN's u8×s8 kernel: activations go in unsigned with zero point 128, because signed
ones fall back to a reference kernel hundreds of times slower. With VNNI (or AMX) it sums in int32
and is exact. Without (AVX2, AVX-512 without VNNI) it multiplies byte pairs with ``vpmaddubsw``,
which saturates at int16: two products of ~128 × 127 already overflow, so outputs went wrong
wherever weights are large (min cosine 0.992 on all-MiniLM-L6-v2 under AVX2). There the activations
keep 7 bits (``[-63, 63]`` + 64, so a pair sums to at most 2 · 127 · 127 < 2^15): exact again, at
the cost of one bit (min cosine 0.9993 on sentences, but 0.9966 on a two-token "OK.": the fast
mode's probe texts hold short inputs, so its bar refuses int8 there). :func:`int8_activation_levels`
finds out which applies by running the kernel, not by reading CPU flags, so ``ONEDNN_MAX_CPU_ISA``
is honoured. The per-token scale, bias and residual add are applied to its fp32 output.

Only the attention projections (query/key/value and output) go int8; the feed-forward block stays
fp32. Measured on all-MiniLM-L6-v2 over 2,000 mixed texts (min / mean cosine to fp32, speed vs
fp32): every matmul int8 0.993 / 0.998; all but the down-projection 0.9976 / 0.9991, 1.2×;
attention only 0.9992 / 0.9996, 1.1×, the one that keeps cosine ≥ 0.999 for every text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from poolrag.models.fused_linear import FusedLinear

# Chosen on real text (all-MiniLM-L6-v2, attention matmuls int8): the best min cosine to fp32 over
# the 879 Debian FAQ (English) and perlfaq texts and queries, α 0.6-0.9 → 0.99955 / 0.99961 (0.7) /
# 0.99956 (0.75) / 0.99946; held out, the German and French FAQs: 0.99933 at 0.7, where 0.75 let one
# 256-token German answer fall to 0.99895, under the fast-mode bar (benchmarks/RESULTS.md)
SMOOTHING_ALPHA = 0.7
KEEP_FP32 = ("up", "down")  # the feed-forward matmuls stay fp32 (see the module docstring)
FULL_LEVELS = 127  # activations in [-127, 127] + 128: all of u8
SEVEN_BIT_LEVELS = 63  # [-63, 63] + 64: a u8×s8 pair sum fits int16, for kernels without VNNI
_ONE = torch.tensor(1.0)  # the activation scale oneDNN is given: row scales are applied after


class SmoothQuantLinear(nn.Module):
    """A :class:`FusedLinear` (same call signature) as a smoothed int8 matmul with per-token scales."""

    def __init__(
        self,
        fused: FusedLinear,
        input_absmax: torch.Tensor,
        alpha: float = SMOOTHING_ALPHA,
        levels: int | None = None,
    ) -> None:
        super().__init__()
        if fused.packed_weight is not None:
            raise ValueError("the layer's weight is already packed; quantise before serving starts")
        if levels is None:
            levels = int8_activation_levels() or FULL_LEVELS
        if not 1 <= levels <= FULL_LEVELS:
            raise ValueError(f"activation levels must be within 1..{FULL_LEVELS}, got {levels}")
        weight = fused.linear.weight.detach().float()
        weight_absmax = weight.abs().amax(0).clamp(min=1e-5)
        smooth = input_absmax.float().clamp(min=1e-5) ** alpha / weight_absmax ** (1 - alpha)
        smooth = smooth.clamp(min=1e-5)
        smoothed = weight * smooth[None, :]
        self.weight_scale = (smoothed.abs().amax(1) / 127).clamp(min=1e-12)
        qweight = torch.round(smoothed / self.weight_scale[:, None]).clamp(-127, 127).to(torch.int8)
        self.qweight = torch.ops.onednn.qlinear_prepack(qweight, [4096, qweight.shape[1]])
        self.weight_zero = torch.zeros(weight.shape[0], dtype=torch.int64)
        self.inv_smooth = 1.0 / smooth
        bias = fused.linear.bias
        self.bias = None if bias is None else bias.detach().float()
        self.activation = fused.activation
        self.levels = levels
        self.zero_point = torch.tensor(levels + 1, dtype=torch.int64)

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of ``x`` smoothed and quantised to u8 (zero point ``levels + 1``), and their scales."""
        smoothed = x * self.inv_smooth
        # abs + amax: 10x faster than vector_norm(inf) or aminmax on the CPU (measured)
        scale = smoothed.abs().amax(1, keepdim=True).clamp_(min=1e-12) / self.levels
        return smoothed.div_(scale).round_().add_(self.levels + 1).to(torch.uint8), scale

    def dequantize(
        self, sums: torch.Tensor, scale: torch.Tensor, residual: torch.Tensor | None
    ) -> torch.Tensor:
        """The matmul's weight-scaled sums back to activations: row scale, bias, GELU, residual."""
        out = sums.mul_(scale) if self.bias is None else torch.addcmul(self.bias, sums, scale)
        if self.activation == "gelu":
            out = F.gelu(out)
        return out if residual is None else out.add_(residual)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        quantized, scale = self.quantize(x)
        sums = u8s8_matmul(quantized, self.zero_point, self.qweight, self.weight_scale, self.weight_zero)
        return self.dequantize(sums, scale, residual)


def u8s8_matmul(
    quantized: torch.Tensor,
    zero_point: torch.Tensor,
    qweight: torch.Tensor,
    weight_scale: torch.Tensor,
    weight_zero: torch.Tensor,
) -> torch.Tensor:
    """oneDNN's u8×s8 matmul of ``[T, in]`` activations and a prepacked int8 weight: exact integer
    sums times each output channel's weight scale, in fp32 (the activations' scale is left out)."""
    return torch.ops.onednn.qlinear_pointwise.tensor(
        quantized,
        _ONE,
        zero_point,
        qweight,
        weight_scale,
        weight_zero,
        None,
        1.0,
        0,
        torch.float32,
        "none",
        [],
        "",
    )


@contextmanager
def recording_input_absmax(model: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Per-input-channel max |x| of every :class:`FusedLinear` while the block runs the model."""
    absmax: dict[str, torch.Tensor] = {}

    def recorder(name: str) -> Callable[[nn.Module, tuple[torch.Tensor, ...]], None]:
        def hook(_: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0].detach()
            seen = x.reshape(-1, x.shape[-1]).abs().amax(0).float()
            absmax[name] = seen if name not in absmax else torch.maximum(absmax[name], seen)

        return hook

    handles = [
        module.register_forward_pre_hook(recorder(name))
        for name, module in model.named_modules()
        if isinstance(module, FusedLinear)
    ]
    try:
        yield absmax
    finally:
        for handle in handles:
            handle.remove()


def smooth_quantize(
    model: nn.Module, input_absmax: dict[str, torch.Tensor], levels: int | None = None
) -> int:
    """Swap (in place) each recorded encoder :class:`FusedLinear` for a :class:`SmoothQuantLinear`,
    except the ``KEEP_FP32`` ones and the heads; returns how many were swapped."""
    swapped = 0
    for name, module in list(model.named_modules()):
        parent_name, _, child = name.rpartition(".")
        if not isinstance(module, FusedLinear) or name not in input_absmax or child in KEEP_FP32:
            continue
        if not parent_name.startswith("layers."):
            continue  # classification heads see one row per sequence: nothing to gain
        setattr(
            model.get_submodule(parent_name),
            child,
            SmoothQuantLinear(module, input_absmax[name], levels=levels),
        )
        swapped += 1
    return swapped


def _int8_matmul_is_exact(levels: int) -> bool:
    """Whether oneDNN's u8×s8 matmul returns the exact integer sums for activations in
    ``[-levels, levels]``, worst cases included: every activation and weight at its extreme, so
    any int16 saturation of pair sums shows."""
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state alone
        torch.manual_seed(0)
        x = torch.randint(-levels, levels + 1, (6, 64))
        w = torch.randint(-127, 128, (16, 64))
    x[0], x[1] = levels, -levels
    w[0], w[1] = 127, -127
    packed = torch.ops.onednn.qlinear_prepack(w.to(torch.int8), [4096, 64])
    zero = torch.tensor(levels + 1, dtype=torch.int64)
    no_zero = torch.zeros(16, dtype=torch.int64)
    got = u8s8_matmul((x + levels + 1).to(torch.uint8), zero, packed, torch.ones(16), no_zero)
    return torch.equal(got, (x @ w.T).float())  # |sums| < 2^24: exact in fp32


@cache
def int8_activation_levels() -> int | None:
    """How many levels either side of zero activations may use with this CPU's int8 kernel:
    ``FULL_LEVELS`` where it is exact, ``SEVEN_BIT_LEVELS`` where full-range pair sums saturate
    (no VNNI), ``None`` when this PyTorch build has no usable oneDNN int8 matmul."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.onednn, "qlinear_pointwise"):
        return None
    for levels in (FULL_LEVELS, SEVEN_BIT_LEVELS):
        try:
            if _int8_matmul_is_exact(levels):
                return levels
        except (RuntimeError, AttributeError):
            return None
    return None
