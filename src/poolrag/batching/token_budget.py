"""Cut work into batches by a token budget rather than a fixed count.

A fixed batch size either wastes the device on short texts or runs out of memory on long ones;
a budget on padded tokens (rows × longest row) keeps each forward pass the same size. Sorting by
length first keeps padding small.
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.errors import InvalidInputError


class TokenBudgetBatcher:
    """Plans batches of indices whose padded size stays within ``max_batch_tokens``."""

    def __init__(self, max_batch_tokens: int = 16384, max_batch_size: int = 512) -> None:
        if max_batch_tokens <= 0 or max_batch_size <= 0:
            raise InvalidInputError("max_batch_tokens and max_batch_size must be positive")
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size

    def plan(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices grouped into batches, longest first (one over-budget item gets a batch alone)."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in order:
            n = lengths[i]
            width = max(longest, n)
            if current and (
                width * (len(current) + 1) > self.max_batch_tokens or len(current) >= self.max_batch_size
            ):
                batches.append(current)
                current, width = [], n
            current.append(i)
            longest = width
        if current:
            batches.append(current)
        return batches
