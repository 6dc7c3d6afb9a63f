"""Device and dtype choice: exact fp32 on CPU, half precision on accelerators."""

from __future__ import annotations

import logging

import torch

from poolrag.errors import InvalidInputError

logger = logging.getLogger(__name__)

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
#: model types whose activations overflow float16 (vLLM refuses float16 for the same ones)
_NO_FLOAT16 = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})
#: the torch dtypes a model runs in: the names' and float64 (an exact reference)
_RUNNABLE = frozenset({*_DTYPES.values(), torch.float64})


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None``: the GPU when there is one, else the CPU. A device torch does not know, or one this
    machine's torch cannot reach, is one line here rather than torch's assertion at the first
    tensor moved (``Torch not compiled with CUDA enabled``)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise InvalidInputError(f"device {str(device)!r} is not a device torch knows ({exc})") from None
    missing = _unreachable(chosen)
    if missing is not None:
        raise InvalidInputError(f"device {str(device)!r} is not available here: {missing}")
    return chosen


def _unreachable(device: torch.device) -> str | None:
    """Why this process cannot run on ``device``, or ``None`` when it can (or cannot be asked)."""
    if device.type in ("cuda", "xpu"):
        backend = getattr(torch, device.type)
        if not backend.is_available():
            return f"this torch ({torch.__version__}) sees no {device.type.upper()} device"
        if device.index is not None and device.index >= backend.device_count():
            return f"there are {backend.device_count()} {device.type.upper()} devices (0-based index)"
    if device.type == "mps" and not torch.backends.mps.is_available():
        return "this torch has no MPS (Apple GPU) support on this machine"
    return None


def resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """``auto``: bf16 on GPUs that have it, else fp16; fp32 on CPU so results match the reference.

    Names are case-insensitive, as :class:`~poolrag.EngineArgs` checks them and vLLM reads them
    (``AUTO`` is ``auto``). A ``torch.dtype`` must be a float one a model's layers run in (float64
    too, as vLLM takes any): ``torch.int8``, ``torch.float8_e4m3fn`` or a complex one is refused
    here, before any weights load, rather than failing deep in a kernel or a transformers error
    that suggests ``trust_remote_code``.
    """
    if isinstance(dtype, torch.dtype):
        if dtype not in _RUNNABLE:
            raise InvalidInputError(
                f"dtype {dtype} cannot run a model here: use torch.float32, torch.bfloat16 or "
                "torch.float16 (8-bit weights: quantization='int8' or 'fp8')"
            )
        return dtype
    name = dtype.lower()
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return _DTYPES[name]
    except KeyError:
        raise InvalidInputError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16") from None


def dtype_for_model(dtype: torch.dtype, asked: str | torch.dtype, model_type: str) -> torch.dtype:
    """``dtype`` (resolved from ``asked``) for a model of ``model_type``. Gemma-2/3, PLaMo-2 and GLM-4
    overflow in float16 (inf/NaN vectors), so, as in vLLM, ``auto`` takes float32 instead (a GPU
    without bf16) and an explicit float16 is refused."""
    if dtype != torch.float16 or model_type not in _NO_FLOAT16:
        return dtype
    if isinstance(asked, str) and asked.lower() == "auto":
        logger.info("%s overflows in float16: running float32 (this GPU has no bfloat16)", model_type)
        return torch.float32
    raise InvalidInputError(
        f"{model_type} models overflow in float16 (inf/NaN outputs): pass dtype='bfloat16' or 'float32'"
    )
