"""Recognising out-of-memory errors, on any device, so a batch can be split instead of failing."""

from __future__ import annotations

import re

import torch

from poolrag.errors import OutOfMemoryError

#: What a CPU allocation failure says in a plain ``RuntimeError``: PyTorch's allocator ("can't
#: allocate memory"), C++'s ``std::bad_alloc``, and oneDNN failing to create a primitive (its JIT
#: code or scratchpad found no address space under an ``RLIMIT_AS``), not the descriptor that an
#: unsupported shape fails at.
_CPU_OOM = re.compile(
    r"can't allocate memory|not enough memory|out of memory|bad_alloc"
    r"|could not create a primitive(?! descriptor)"
)


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's ``OutOfMemoryError``, or the CPU allocator's failure (a plain ``RuntimeError``)."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError, OutOfMemoryError)):
        return True
    return isinstance(exc, RuntimeError) and _CPU_OOM.search(str(exc).lower()) is not None


def too_big_alone(exc: BaseException, tokens: int) -> OutOfMemoryError:
    """The error of one input that ran out of memory in a batch of its own, naming its size."""
    text = str(exc).strip()
    cause = text.splitlines()[0] if text else type(exc).__name__
    return OutOfMemoryError(
        f"out of memory running one input of {tokens} tokens in a batch of its own ({cause}); "
        "shorten or truncate it, or give the model more memory"
    )


def release_cached_memory(device: torch.device) -> None:
    """Give the caching allocator's free blocks back so the retried halves can use them."""
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()
