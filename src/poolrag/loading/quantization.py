"""Optional 8-bit weights, through torchao.

torchao (PyTorch's own quantization library) is chosen over bitsandbytes because its int8
weight-only scheme runs on CPU as well as CUDA, plugs into ``from_pretrained`` via
``TorchAoConfig`` and is maintained with torch itself; bitsandbytes' LLM.int8 is CUDA-first.
Weight-only int8 halves weight memory against bf16 while activations stay in bf16/fp32, which
keeps embeddings and scores close to the full-precision model.
"""

from __future__ import annotations

from typing import Any

from poolrag.errors import ModelLoadError

QUANTIZATION_SCHEMES = ("int8",)


def quantization_config(scheme: str) -> Any:
    """The transformers ``quantization_config`` for ``scheme``."""
    if scheme not in QUANTIZATION_SCHEMES:
        raise ModelLoadError(f"unknown quantization {scheme!r}; supported: {', '.join(QUANTIZATION_SCHEMES)}")
    try:
        from torchao.quantization import Int8WeightOnlyConfig
        from transformers import TorchAoConfig
    except ImportError as exc:
        raise ModelLoadError("quantization='int8' needs torchao: pip install 'poolrag[big-models]'") from exc
    return TorchAoConfig(quant_type=Int8WeightOnlyConfig())
