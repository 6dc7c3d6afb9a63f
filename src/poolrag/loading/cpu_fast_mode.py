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
logged and kept in :class:`FastModeReport`. That measurement is the contract, not the CPU's name:
the arithmetic differs by instruction set (int8 without VNNI saturates, see
:mod:`poolrag.models.int8_linear`; ``ONEDNN_MAX_CPU_ISA`` changes it on the same machine), so below
the bar (min cosine ``DEFAULT_MIN_COSINE`` unless the caller sets another) the engine falls back
to the untouched fp32 model and says why.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from poolrag.errors import InvalidInputError
from poolrag.models.fused_linear import onednn_available
from poolrag.models.int8_linear import (
    FULL_LEVELS,
    int8_activation_levels,
    recording_input_absmax,
    smooth_quantize,
)
from poolrag.request import PoolingRequest, ResolvedParams

logger = logging.getLogger(__name__)

FAST_MODES = ("bf16", "int8")
DEFAULT_MIN_COSINE = 0.999  # min cosine to fp32 on the probe texts below which fp32 is kept


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


def onednn_isa_limit() -> str | None:
    """``ONEDNN_MAX_CPU_ISA`` (or its old name): oneDNN then ignores the CPU's newer instructions."""
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return None if limit is None or limit.upper() in ("ALL", "DEFAULT") else limit.upper()


def _onednn_may_use(*markers: str) -> bool:
    limit = onednn_isa_limit()
    return limit is None or any(marker in limit for marker in markers)


def has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16: the CPU computes bf16 dot products natively (and oneDNN may use them)."""
    flags = cpu_flags()
    return ("avx512_bf16" in flags or "amx_bf16" in flags) and _onednn_may_use("BF16", "FP16", "AMX", "AVX10")


def bf16_beats_fp32() -> bool:
    """AMX makes oneDNN's bf16 matmuls faster than fp32. With AVX512-BF16 alone it depends on the
    CPU: 0.5-0.8x the fp32 rate on a Xeon, 1.8x on an EPYC (benchmarks/RESULTS.md)."""
    return "amx_bf16" in cpu_flags() and _onednn_may_use("AMX")


def describe_isa() -> str:
    """The arithmetic this process gets, for logs and reports: PyTorch's kernel dispatch level, the
    CPU flags that decide fast-mode numerics, and oneDNN's cap when one is set."""
    flags = sorted(f for f in cpu_flags() if "vnni" in f or "bf16" in f or f.startswith("amx"))
    text = f"{torch.backends.cpu.get_cpu_capability()}; cpu flags: {' '.join(flags) or 'no vnni/bf16/amx'}"
    limit = onednn_isa_limit()
    return text if limit is None else f"{text}; oneDNN capped at {limit}"


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


def _swap_linears(
    module: nn.Module, make: Callable[[nn.Linear], nn.Module], keep: frozenset[str] = frozenset()
) -> int:
    count = 0
    for name, child in module.named_children():
        if _plain_linear(child) and name not in keep:
            setattr(module, name, make(child))
            count += 1
        else:
            count += _swap_linears(child, make, keep)
    return count


_WEIGHT_READ = re.compile(r"\.([A-Za-z_]\w*)\.weight\b")  # `.dt_proj.weight`, not `.0.weight`


@lru_cache(maxsize=256)
def _weights_read_in(cls: type) -> frozenset[str]:
    """Attribute names whose ``.weight`` the code of ``cls`` (and its bases) reads directly."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith(("torch.", "builtins")):
            continue
        try:
            names.update(_WEIGHT_READ.findall(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (built in, or defined at run time)
            continue
    return frozenset(names)


def weights_read_directly(model: nn.Module) -> frozenset[str]:
    """Layers the model's own code reads ``.weight`` of, e.g. Jamba's Mamba mixer computing
    ``self.dt_proj.weight @ x`` on CPU: packing them would remove the attribute it reads."""
    return frozenset().union(*(_weights_read_in(cls) for cls in {type(m) for m in model.modules()}))


def pack_linear_weights(model: nn.Module) -> nn.Module:
    """Swap every fp32/bf16 ``nn.Linear`` on the CPU for a :class:`PackedLinear` (in place).

    Left alone when oneDNN is unavailable, the model is on another device or in another dtype, or
    its code is not transformers' own (remote code may read ``layer.weight``, which packing removes);
    layers whose ``.weight`` transformers' own code reads stay plain (:func:`weights_read_directly`).
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
    keep = weights_read_directly(model)
    count = _swap_linears(model, PackedLinear, keep)
    logger.debug("packed %d linear layers for oneDNN (left plain, read directly: %s)", count, sorted(keep))
    return model


@dataclass(frozen=True, slots=True)
class FastModeReport:
    """What a fast mode costs in accuracy, measured on probe texts when it was switched on."""

    mode: str
    min_cosine: float
    mean_cosine: float
    native: bool  # the CPU has hardware support for the mode's arithmetic
    active: bool = True  # False: below the bar, the engine runs the exact fp32 model instead
    isa: str = ""  # see describe_isa()
    reason: str = ""  # why it is active or not, in words
    min_cosine_required: float = DEFAULT_MIN_COSINE

    def compiled_min_cosine(self) -> float:
        """The cosine a compiled graph of the fast model must keep to its eager outputs so that the
        mode's bar to fp32 still holds: angles add at most (triangle inequality on the sphere), so
        the compiled graph may use the angle the measured cosine leaves of the bar's. An exact
        bar would refuse int8's compile outright: a 1e-7 difference upstream (a fused LayerNorm)
        moves an activation across a quantisation step (per token row 0.99993 to eager, measured)."""
        spare = math.acos(min(self.min_cosine_required, 1.0)) - math.acos(min(self.min_cosine, 1.0))
        return math.cos(max(spare, 0.0))


def _mean_states(forward: Callable[[Sequence[PoolingRequest]], object], probe: Sequence[PoolingRequest]):
    out = forward(probe)
    tokens = out.tokens  # type: ignore[attr-defined]
    if tokens is None:
        return out.sequences.float()  # type: ignore[attr-defined]
    rows = torch.split(tokens.states.float(), tokens.lengths.tolist())
    return torch.stack([r.mean(0) for r in rows])


def convert_for_fast_mode(model: nn.Module, mode: str) -> nn.Module:
    """A bf16 or int8 copy of ``model`` for the CPU (the fp32 original is left untouched); ``mode``
    is one of :data:`FAST_MODES`, as :func:`enable_cpu_fast_mode` checked."""
    if mode == "bf16":
        return copy.deepcopy(model).to(torch.bfloat16)  # packed for oneDNN when serving starts
    from torch.ao.quantization import quantize_dynamic

    return quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)


def check_fast_mode_dtype(mode: str | None, dtype: torch.dtype, device: torch.device) -> None:
    """A fast mode is measured against, and falls back to, the fp32 model: on a CPU engine loaded in
    bf16 or fp16 its "cosine to fp32" would compare the half model with itself (bf16 on fp16 would
    also run bf16 while the engine says fp16), and int8 would fail in the first matmul. Refused
    before any weights load; a GPU engine is refused as one in :func:`enable_cpu_fast_mode`."""
    if mode is not None and device.type == "cpu" and dtype != torch.float32:
        dtype_name = str(dtype).removeprefix("torch.")
        raise InvalidInputError(
            f"cpu_fast_mode={mode!r} is measured against the fp32 model: pass dtype='auto' or "
            f"'float32' with it, not {dtype_name} (dtype={dtype_name!r} alone runs {dtype_name}, unmeasured)"
        )


def enable_cpu_fast_mode(
    runner: object,
    mode: str,
    probe: Sequence[PoolingRequest],
    min_cosine: float | None = None,
) -> FastModeReport:
    """Switch ``runner``'s model to ``mode`` if its min cosine to fp32 on ``probe`` reaches
    ``min_cosine`` (default ``DEFAULT_MIN_COSINE``); otherwise put the fp32 model back, untouched
    and not yet packed, as if no fast mode had been asked. Either way the report says why."""
    if mode not in FAST_MODES:
        raise InvalidInputError(f"unknown cpu_fast_mode {mode!r}; use one of {', '.join(FAST_MODES)}")
    required = DEFAULT_MIN_COSINE if min_cosine is None else float(min_cosine)
    if math.isnan(required):
        raise InvalidInputError("cpu_fast_mode_min_cosine must be a number (a min cosine to fp32)")
    device = getattr(runner, "device", torch.device("cpu"))
    if device.type != "cpu":
        raise InvalidInputError("cpu_fast_mode applies to CPU engines; on GPUs pass dtype='bfloat16'")
    isa = describe_isa()
    original = runner.model  # type: ignore[attr-defined]
    levels = int8_activation_levels() if mode == "int8" else None
    native = has_native_bf16() if mode == "bf16" else levels == FULL_LEVELS
    if mode == "int8" and getattr(original, "native", False) and levels is not None:
        note = (
            "oneDNN's int8 kernel saturates u8×s8 pair sums here (no VNNI): 7-bit activations"
            if levels < FULL_LEVELS
            else "oneDNN int8 with full 8-bit activations"
        )
        # the fp32 reference pass doubles as SmoothQuant's calibration
        with recording_input_absmax(original) as input_absmax:
            reference = _mean_states(runner.forward, probe)  # type: ignore[attr-defined]

        def quantize(target: nn.Module) -> nn.Module:
            quantized = copy.deepcopy(target)  # the fp32 original stays intact until the verdict
            swapped = smooth_quantize(quantized, input_absmax, levels)
            logger.info("cpu_fast_mode=int8: %d matmuls SmoothQuant int8 (per-token scales)", swapped)
            return quantized

        runner.replace_model(quantize)  # type: ignore[attr-defined]
    else:
        note = "bf16 weights and activations" if mode == "bf16" else "dynamic int8 (one scale per tensor)"
        reference = _mean_states(runner.forward, probe)  # type: ignore[attr-defined]
        runner.replace_model(lambda model: convert_for_fast_mode(model, mode))  # type: ignore[attr-defined]
    fast = _mean_states(runner.forward, probe)  # type: ignore[attr-defined]
    cosine = F.cosine_similarity(reference, fast, dim=-1)
    lowest, mean = float(cosine.min()), float(cosine.mean())
    images = sum(r.pixels is not None for r in probe)
    inputs = f"{len(probe) - images} probe texts" + (f" and {images} probe images" if images else "")
    measured = f"min cosine to fp32 {lowest:.6f} (mean {mean:.6f}) on {inputs}"
    active = lowest >= required
    if active:
        reason = f"{measured} >= {required}; {note}"
        logger.info("cpu_fast_mode=%s on (%s): %s", mode, isa, reason)
        if mode == "bf16" and not native:
            logger.warning(
                "cpu_fast_mode='bf16' is emulated on this CPU (no AVX512-BF16/AMX): ~0.2x fp32's speed"
            )
        elif mode == "bf16" and not bf16_beats_fp32():
            logger.info("cpu_fast_mode='bf16' without AMX: its speed against fp32 depends on the CPU")
    else:
        runner.replace_model(lambda _: original)  # type: ignore[attr-defined]
        reason = f"{measured} < {required}; {note}"
        logger.warning("cpu_fast_mode=%s falls back to exact fp32 (%s): %s", mode, isa, reason)
    return FastModeReport(mode, lowest, mean, native, active, isa, reason, required)


PROBE_TEXTS = (
    "What is the capital of France?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The committee postponed the vote on the amendment until the next parliamentary session, "
    "citing the need for further consultation with regional governments and independent experts.",
    "how do I reset my password",
    "Embedding models map text to vectors so that similar meanings land close together; rerankers "
    "read a query and a passage jointly and return a relevance score, which is slower but more precise.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    # the shortest inputs: with a handful of tokens a quantised forward's errors average out least
    # (int8 with 7-bit activations on an AVX2-only EPYC: 0.9993 at worst on the sentences above,
    # 0.9988 on "Weather", 0.9966 on "OK.")
    "Weather",
    "OK.",
)


def _probe_images() -> list[object]:
    """Three pictures drawn here (a gradient, stripes, a disc): a fast mode must hold for the image
    tower of a model that has one, not only for its text tower."""
    from PIL import Image, ImageDraw

    gradient = Image.linear_gradient("L").resize((96, 64)).convert("RGB")
    stripes = Image.new("RGB", (80, 80), (20, 90, 160))
    draw = ImageDraw.Draw(stripes)
    for x in range(0, 80, 10):
        draw.rectangle((x, 0, x + 4, 79), fill=(230, 200, 40))
    disc = Image.new("RGB", (64, 96), "white")
    ImageDraw.Draw(disc).ellipse((8, 20, 56, 68), fill=(200, 30, 30))
    return [gradient, stripes, disc]


def probe_requests(processor: object) -> list[PoolingRequest]:
    """The probe texts, tokenised by the engine's input processor (plain texts, no prompt), and
    probe images where the model reads them."""
    params = ResolvedParams(task="probe")
    requests = processor.texts(list(PROBE_TEXTS), params, -1, None)  # type: ignore[attr-defined]
    images = getattr(processor, "images", None)
    if images is not None:
        requests += [images.request(image, params, "probe") for image in _probe_images()]
    return requests
