"""CPU speed-ups applied to a loaded model: pre-packed oneDNN linear layers, and the opt-in fast mode.

* **Exact fp32** (default on CPU): every ``nn.Linear`` is swapped for one whose weight is reordered
  once, at load, into oneDNN's blocked layout, so no matmul re-packs its weight on every call (the
  same kernels ``torch.compile``'s CPU freezing pass uses, without the compile time). Results
  stay fp32 and differ from eager only by summation order (~1e-6 relative).
* **Fast mode** (opt-in, ``Engine(..., cpu_fast_mode="bf16")``): weights and activations in bf16 on
  CPUs with native bf16 dot products (AVX512-BF16 / AMX), pooling still in fp32. ``"int8"``:
  native encoders get SmoothQuant int8 matmuls with per-token scales, calibrated on the probe
  texts (:mod:`poolrag.models.int8_linear`); other models dynamic int8 (one scale per tensor),
  whose accuracy depends on the model's activation outliers. Either way the cost is measured.

The accuracy cost of a fast mode is measured when it is switched on: the same probe texts go
through the fp32 model and the fast one, and the cosine between their mean-pooled states is
logged and kept in :class:`FastModeReport`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from poolrag.errors import InvalidInputError
from poolrag.models.fused_linear import onednn_available
from poolrag.models.int8_linear import int8_available, recording_input_absmax, smooth_quantize
from poolrag.request import PoolingRequest, ResolvedParams

logger = logging.getLogger(__name__)

FAST_MODES = ("bf16", "int8")


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16: the CPU computes bf16 dot products natively."""
    flags = cpu_flags()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def bf16_beats_fp32() -> bool:
    """Only AMX makes oneDNN's bf16 matmuls faster than fp32: with AVX512-BF16 alone they measured
    0.5-0.8x the fp32 rate (benchmarks/RESULTS.md)."""
    return "amx_bf16" in cpu_flags()


class PackedLinear(nn.Module):
    """``nn.Linear`` with its weight pre-packed for oneDNN; same inputs, same outputs."""

    def __init__(self, linear: nn.Linear, batch_hint: int = 1024) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        weight = linear.weight.detach()
        self.register_buffer("packed_weight", torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint))
        bias = linear.bias.detach() if linear.bias is not None else None
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        out = torch.ops.mkldnn._linear_pointwise(
            x.reshape(-1, shape[-1]), self.packed_weight, self.bias, "none", [], ""
        )
        return out.reshape(*shape[:-1], self.out_features)


def _plain_linear(module: nn.Module) -> bool:
    """An ``nn.Linear`` holding ordinary weights (not quantised tensors, not under accelerate hooks)."""
    return (
        type(module) is nn.Linear
        and type(module.weight) is nn.Parameter
        and type(module.weight.data) is torch.Tensor
        and not hasattr(module, "_hf_hook")
    )


def _swap_linears(module: nn.Module, make: Callable[[nn.Linear], nn.Module]) -> int:
    count = 0
    for name, child in module.named_children():
        if _plain_linear(child):
            setattr(module, name, make(child))
            count += 1
        else:
            count += _swap_linears(child, make)
    return count


def pack_linear_weights(model: nn.Module) -> nn.Module:
    """Swap every fp32/bf16 ``nn.Linear`` on the CPU for a :class:`PackedLinear` (in place).

    Left alone when oneDNN is unavailable, the model is on another device or in another dtype, or
    its code is not transformers' own (remote code may read ``layer.weight``, which packing removes).
    The original weights are dropped: the model is for inference only from here on.
    """
    param = next(model.parameters(), None)
    if param is None or param.device.type != "cpu" or param.dtype not in (torch.float32, torch.bfloat16):
        return model
    if getattr(model, "hf_device_map", None) or getattr(model, "is_quantized", False):
        return model
    if not type(model).__module__.startswith("transformers."):
        return model  # remote code may read ``layer.weight`` directly; only transformers' own is known safe
    if not onednn_available(param.dtype):
        logger.info("oneDNN packed linear layers unavailable for %s; keeping eager ones", param.dtype)
        return model
    count = _swap_linears(model, PackedLinear)
    logger.debug("packed %d linear layers for oneDNN", count)
    return model


@dataclass(frozen=True, slots=True)
class FastModeReport:
    """What a fast mode costs in accuracy, measured on probe texts when it was switched on."""

    mode: str
    min_cosine: float
    mean_cosine: float
    native: bool  # the CPU has hardware support for the mode's arithmetic


def _mean_states(forward: Callable[[Sequence[PoolingRequest]], object], probe: Sequence[PoolingRequest]):
    out = forward(probe)
    tokens = out.tokens  # type: ignore[attr-defined]
    if tokens is None:
        return out.sequences.float()  # type: ignore[attr-defined]
    rows = torch.split(tokens.states.float(), tokens.lengths.tolist())
    return torch.stack([r.mean(0) for r in rows])


def convert_for_fast_mode(model: nn.Module, mode: str) -> nn.Module:
    """A bf16 or int8 copy of ``model`` for the CPU (the fp32 original is left untouched)."""
    if mode == "bf16":
        return copy.deepcopy(model).to(torch.bfloat16)  # packed for oneDNN when serving starts
    if mode == "int8":
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)
    raise InvalidInputError(f"unknown cpu_fast_mode {mode!r}; use one of {', '.join(FAST_MODES)}")


def enable_cpu_fast_mode(runner: object, mode: str, probe: Sequence[PoolingRequest]) -> FastModeReport:
    """Switch ``runner``'s model to ``mode`` and measure the cosine to fp32 on ``probe``."""
    if mode not in FAST_MODES:
        raise InvalidInputError(f"unknown cpu_fast_mode {mode!r}; use one of {', '.join(FAST_MODES)}")
    device = getattr(runner, "device", torch.device("cpu"))
    if device.type != "cpu":
        raise InvalidInputError("cpu_fast_mode applies to CPU engines; on GPUs pass dtype='bfloat16'")
    native = (
        has_native_bf16() if mode == "bf16" else "avx512_vnni" in cpu_flags() or "avx_vnni" in cpu_flags()
    )
    if not native:
        logger.warning("cpu_fast_mode=%r: this CPU lacks native support, it may be slower than fp32", mode)
    elif mode == "bf16" and not bf16_beats_fp32():
        logger.warning("cpu_fast_mode='bf16' without AMX: bf16 matmuls run slower than fp32 on this CPU")
    model = runner.model  # type: ignore[attr-defined]
    if mode == "int8" and getattr(model, "native", False) and int8_available():
        # the fp32 reference pass doubles as SmoothQuant's calibration
        with recording_input_absmax(model) as input_absmax:
            reference = _mean_states(runner.forward, probe)  # type: ignore[attr-defined]

        def quantize(target: nn.Module) -> nn.Module:
            swapped = smooth_quantize(target, input_absmax)
            logger.info("cpu_fast_mode=int8: %d matmuls SmoothQuant int8 (per-token scales)", swapped)
            return target

        runner.replace_model(quantize)  # type: ignore[attr-defined]
    else:
        reference = _mean_states(runner.forward, probe)  # type: ignore[attr-defined]
        runner.replace_model(lambda model: convert_for_fast_mode(model, mode))  # type: ignore[attr-defined]
    fast = _mean_states(runner.forward, probe)  # type: ignore[attr-defined]
    cosine = F.cosine_similarity(reference, fast, dim=-1)
    report = FastModeReport(mode, float(cosine.min()), float(cosine.mean()), native)
    logger.info(
        "cpu_fast_mode=%s: cosine to fp32 on %d probe texts: min %.6f, mean %.6f",
        mode,
        len(probe),
        report.min_cosine,
        report.mean_cosine,
    )
    if report.min_cosine < 0.99:
        logger.warning(
            "cpu_fast_mode=%s changes this model's outputs a lot (cosine to fp32 %.4f): prefer fp32 or bf16",
            mode,
            report.min_cosine,
        )
    return report


PROBE_TEXTS = (
    "What is the capital of France?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The committee postponed the vote on the amendment until the next parliamentary session, "
    "citing the need for further consultation with regional governments and independent experts.",
    "how do I reset my password",
    "Embedding models map text to vectors so that similar meanings land close together; rerankers "
    "read a query and a passage jointly and return a relevance score, which is slower but more precise.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
)


def probe_requests(processor: object) -> list[PoolingRequest]:
    """The probe texts, tokenised by the engine's input processor (plain texts, no prompt)."""
    params = ResolvedParams(task="probe")
    return processor.texts(list(PROBE_TEXTS), params, -1, None)  # type: ignore[attr-defined]
