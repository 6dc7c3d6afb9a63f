"""Cut work into batches by a token budget rather than a fixed count.

A fixed batch size either wastes the device on short texts or runs out of memory on long ones;
a budget on the tokens of a forward pass keeps each pass the same size. Sorting by length first
keeps padding small; a cap on the padding share of a batch keeps it small even when only a few
texts of very different lengths are queued together (a query next to a 500-token passage): it is
cheaper to run two small batches than to pad the query to 500 tokens. A packed batch has no
padding, so its budget counts real tokens and the cap does not apply.

A third layout sits between the two: packed rows whose attention runs over a padded block (the
native encoders on a GPU in fp32; on a CPU they pad only within groups of neighbouring lengths,
which needs no cap). There padding costs only attention FLOPs, ``W² - l²`` per row against
``~6·hidden·l + l²`` of useful work, so the cap is on that share instead: short texts of
different lengths then share one large batch (big matmuls) instead of being cut into many.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from poolrag.counts import check_count
from poolrag.errors import InvalidInputError


def default_batch_tokens(device: torch.device) -> int:
    """Tokens per forward pass: big on GPUs (fill the device), small on CPUs (stay in cache)."""
    return 16384 if device.type == "cuda" else 4096


class TokenBudgetBatcher:
    """Plans batches of indices whose size stays within ``max_batch_tokens``.

    Args:
        max_batch_tokens: tokens of one forward pass (padded rows × width, or real tokens when packed).
        max_batch_size: sequences of one forward pass.
        max_padding: largest share of a batch's work that padding may waste (0.10 = 10%): padded
            tokens for the padded layout, attention FLOPs when only attention pads.
    """

    def __init__(
        self, max_batch_tokens: int = 16384, max_batch_size: int = 512, max_padding: float = 0.10
    ) -> None:
        check_count(max_batch_tokens, "max_batch_tokens")
        check_count(max_batch_size, "max_batch_size")
        if not 0.0 <= max_padding < 1.0:
            raise InvalidInputError("max_padding must be in [0, 1)")
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_padding = max_padding

    def plan(
        self,
        lengths: Sequence[int],
        *,
        packed: bool = False,
        max_batch_tokens: int | None = None,
        attention_hidden_size: int | None = None,
    ) -> list[list[int]]:
        """Indices grouped into batches, longest first (one over-budget item gets a batch alone).

        ``packed``: no padding anywhere, the budget counts real tokens and nothing is capped.
        ``attention_hidden_size``: packed rows with padded attention (see the module docstring);
        the budget counts real tokens and the cap applies to attention's wasted FLOPs.
        """
        budget = max_batch_tokens or self.max_batch_tokens
        order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
        batches: list[list[int]] = []
        current = _Batch()
        for i in order:
            n = lengths[i]
            if current.indices and self._overflows(current, n, budget, packed, attention_hidden_size):
                batches.append(current.indices)
                current = _Batch()
            current.add(i, n)
        if current.indices:
            batches.append(current.indices)
        return batches

    def _overflows(self, batch: _Batch, n: int, budget: int, packed: bool, hidden: int | None) -> bool:
        """Would one more row of ``n`` tokens break the budget, the size limit or the padding cap?"""
        rows = len(batch.indices) + 1
        width, real, squares = max(batch.width, n), batch.real + n, batch.squares + n * n
        if rows > self.max_batch_size:
            return True
        if hidden is not None:  # attention FLOPs on padding over useful work (~6·hidden·l + l²)
            wasted = (rows * width * width - squares) / (6 * hidden * real + squares)
            return real > budget or wasted > self.max_padding
        if packed:
            return real > budget
        padded = rows * width
        return padded > budget or padded - real > self.max_padding * padded


@dataclass(slots=True)
class _Batch:
    """Running totals of the batch being planned."""

    indices: list[int] = field(default_factory=list)
    width: int = 0
    real: int = 0
    squares: int = 0

    def add(self, index: int, n: int) -> None:
        self.indices.append(index)
        self.width = max(self.width, n)
        self.real += n
        self.squares += n * n
