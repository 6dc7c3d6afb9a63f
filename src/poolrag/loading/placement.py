"""Where the weights of a big model go: one device, a ``device_map``, or a clear refusal.

A 7B decoder in bf16 needs ~15 GB; loading it onto a GPU with less free memory fails deep inside
``from_pretrained`` after minutes of I/O. The parameter count is read from the safetensors
headers first (no weights are read), so a model that cannot fit is refused before loading, with
the two ways out: ``device_map="auto"`` (accelerate spreads layers over GPUs and CPU) or 8-bit
weights.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from poolrag.errors import ModelLoadError
from poolrag.loading.quantization import quantization_config

logger = logging.getLogger(__name__)

# Activations, the CUDA context and allocator slack on top of the weights.
_HEADROOM = 1.2
_GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Placement:
    """How ``from_pretrained`` places weights. Empty: everything on the engine's device."""

    device_map: str | dict[str, Any] | None = None
    quantization: str | None = None

    @property
    def places_itself(self) -> bool:
        """True when transformers/accelerate put the weights, so the model must not be moved."""
        return self.device_map is not None or self.quantization is not None

    def from_pretrained_kwargs(self, device: torch.device) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.device_map is not None:
            try:
                import accelerate  # noqa: F401
            except ImportError as exc:
                raise ModelLoadError(
                    "device_map needs accelerate: pip install 'poolrag[big-models]'"
                ) from exc
            kwargs["device_map"] = self.device_map
        if self.quantization is not None:
            kwargs["quantization_config"] = quantization_config(self.quantization, device)
            # quantise where the weights will live, not on the CPU first
            kwargs.setdefault("device_map", {"": str(device)})
        return kwargs


def checkpoint_parameter_count(folder: Path) -> int | None:
    """Number of parameters in ``folder``'s safetensors files, from their headers alone."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        with path.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        for name, info in header.items():
            if name != "__metadata__":
                total += math.prod(int(dim) for dim in info["shape"])
    return total


def bytes_needed(parameters: int, dtype: torch.dtype, quantization: str | None) -> int:
    per_param = 1 if quantization in ("int8", "fp8") else torch.empty((), dtype=dtype).element_size()
    return int(parameters * per_param * _HEADROOM)


def check_fits(required_bytes: int, free_bytes: int, device: torch.device) -> None:
    """Refuse a model that cannot fit, naming the ways to make it fit."""
    if required_bytes <= free_bytes:
        return
    raise ModelLoadError(
        f"the model needs about {required_bytes / _GIB:.1f} GiB on {device} but only "
        f"{free_bytes / _GIB:.1f} GiB is free; pass device_map='auto' to spread it over the GPUs "
        "and CPU memory, quantization='int8' to halve the weights, or a smaller dtype"
    )


def check_model_fits(folder: Path, dtype: torch.dtype, device: torch.device, placement: Placement) -> None:
    """Pre-load check on one CUDA device; skipped when a device_map does the placing."""
    if device.type != "cuda" or placement.device_map is not None or not torch.cuda.is_available():
        return
    parameters = checkpoint_parameter_count(folder)
    if parameters is None:
        return
    free, _total = torch.cuda.mem_get_info(device)
    check_fits(bytes_needed(parameters, dtype, placement.quantization), free, device)


def input_device(model: torch.nn.Module, fallback: torch.device) -> torch.device:
    """Where input ids must go: the device of the input embeddings (the first layer of a device_map)."""
    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    weight = getattr(embeddings, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.device.type != "meta":
        return weight.device
    return fallback
