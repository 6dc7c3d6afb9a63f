"""Recognising out-of-memory errors, on any device, so a batch can be split instead of failing, and
the token budget the scheduler plans with after one."""

from __future__ import annotations

import logging
import re

import torch

from poolrag.errors import OutOfMemoryError

logger = logging.getLogger(__name__)

#: clean batches at a lowered budget before the first step back up
RECOVERY_BATCHES = 64

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


class OomBudget:
    """The token budget after running out of memory: below the smallest batch that ran out, then
    raised back a doubling at a time, as the shortage may have been brief (another process holding
    device memory for a while, fragmentation) and a budget lowered for good would cost a server
    throughput for the rest of its life, silently.

    Each step up waits for ``patience`` batches in a row that fit; running out of memory again
    before a step has held that long doubles the wait, so a device really too small for the planned
    budget splits a batch a logarithmic number of times over a server's life, not every few batches.
    """

    def __init__(self, patience: int = RECOVERY_BATCHES) -> None:
        #: twice the budget: the smallest batch (in tokens) that ran out of memory, doubled at each
        #: step back up; None: the planned budget holds
        self.limit: int | None = None
        self.patience = patience
        self._planned: int | None = None  # the budget the scheduler asked about last
        self._clean = 0  # batches in a row that fit since the budget last changed
        self._probing = False  # raised since the last out-of-memory, and not yet held ``patience`` batches

    def budget(self, planned: int) -> int:
        """The token budget for the next batch: ``planned``, or lower after running out of memory."""
        self._planned = planned
        if self.limit is None:
            return planned
        return max(1, min(planned, self.limit // 2))

    def fitted(self) -> None:
        """A batch ran without running out of memory: after ``patience`` in a row, a step up."""
        self._clean += 1
        if self._clean < self.patience:
            return
        self._clean, self._probing = 0, self.limit is not None
        if self.limit is None:
            return
        raised = self.limit if self._planned is None else min(self.limit, self._planned)
        self.limit = None if raised == self._planned else raised * 2
        logger.info("token budget raised to %d tokens per batch (planned: %s)", raised, self._planned)

    def ran_out(self, tokens: int) -> None:
        """A batch of ``tokens`` ran out of memory, and a half of it fit."""
        if self._probing:  # the last step up was too far: wait twice as long before the next
            self.patience *= 2
            self._probing = False
        self._clean = 0
        if self.limit is not None and tokens >= self.limit:
            return
        self.limit = tokens
        logger.warning(
            "out of memory on a batch of %d tokens: planning batches of at most %d tokens, "
            "raised back after %d batches in a row that fit",
            tokens,
            max(1, tokens // 2),
            self.patience,
        )
