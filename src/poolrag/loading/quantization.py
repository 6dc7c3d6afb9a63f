"""Optional 8-bit weights, through torchao.

torchao (PyTorch's own quantization library) is chosen over bitsandbytes because its int8
weight-only scheme runs on CPU as well as CUDA, plugs into ``from_pretrained`` via
``TorchAoConfig`` and is maintained with torch itself; bitsandbytes' LLM.int8 is CUDA-first.
Weight-only int8 halves weight memory against bf16 while activations stay in bf16/fp32, which
keeps embeddings and scores close to the full-precision model.

``fp8`` (vLLM's ``--quantization fp8``, the usual choice on recent GPUs) stores the weights as
float8 through torchao's float8 weight-only scheme. Float8 matmuls need a CUDA GPU, so on any other
device it is refused at load with one line instead of running an emulation slower than the
unquantised model.

A checkpoint saved quantized (GPTQ, AWQ, bitsandbytes, compressed-tensors FP8: a
``quantization_config`` in its config.json) holds packed integers or float8 values with their
scales beside them; only transformers, with that format's library, turns them back into weights.
"""

from __future__ import annotations

from typing import Any

import torch

from poolrag.config.option_choices import QUANTIZATION_SCHEMES
from poolrag.errors import ModelLoadError


def saved_quantization(hf_config: object) -> str | None:
    """The ``quant_method`` of a checkpoint saved quantized (its config's ``quantization_config``),
    or ``None`` for full-precision weights."""
    saved = getattr(hf_config, "quantization_config", None)
    if saved is None:
        return None
    method = saved.get("quant_method") if isinstance(saved, dict) else getattr(saved, "quant_method", None)
    return str(getattr(method, "value", method) or "unnamed")


def quantization_config(scheme: str, device: torch.device | None = None) -> Any:
    """The transformers ``quantization_config`` for ``scheme`` on ``device``."""
    if scheme not in QUANTIZATION_SCHEMES:
        raise ModelLoadError(f"unknown quantization {scheme!r}; supported: {', '.join(QUANTIZATION_SCHEMES)}")
    if scheme == "fp8" and (device is None or device.type != "cuda"):
        where = device.type if device is not None else "no device"
        raise ModelLoadError(
            f"quantization='fp8' needs a CUDA GPU (float8 weights), not {where}; use quantization='int8'"
        )
    try:
        from torchao.quantization import Float8WeightOnlyConfig, Int8WeightOnlyConfig
        from transformers import TorchAoConfig
    except ImportError as exc:
        raise ModelLoadError(
            f"quantization={scheme!r} needs torchao: pip install 'poolrag[big-models]'"
        ) from exc
    if scheme == "fp8":
        return TorchAoConfig(quant_type=Float8WeightOnlyConfig())
    return TorchAoConfig(quant_type=Int8WeightOnlyConfig())
