"""Recognising out-of-memory errors, on any device, so a batch can be split instead of failing."""

from __future__ import annotations

import torch

_CPU_OOM_MESSAGES = ("can't allocate memory", "not enough memory", "out of memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's ``OutOfMemoryError``, or the CPU allocator's failure (a plain ``RuntimeError``)."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in _CPU_OOM_MESSAGES)


def release_cached_memory(device: torch.device) -> None:
    """Give the caching allocator's free blocks back so the retried halves can use them."""
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()
