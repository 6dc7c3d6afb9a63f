"""Cut work into batches by a token budget rather than a fixed count.

A fixed batch size either wastes the device on short texts or runs out of memory on long ones;
a budget on the tokens of a forward pass keeps each pass the same size. Sorting by length first
keeps padding small; a cap on the padding share of a batch keeps it small even when only a few
texts of very different lengths are queued together (a query next to a 500-token passage): it is
cheaper to run two small batches than to pad the query to 500 tokens. A packed batch has no
padding, so its budget counts real tokens and the cap does not apply.

A third layout sits between the two: packed rows whose attention runs over a padded block (the
native encoders on a CPU). There padding costs only attention FLOPs, ``W² - l²`` per row against
``~6·hidden·l + l²`` of useful work, so the cap is on that share instead: short texts of
different lengths then share one large batch (big matmuls) instead of being cut into many.
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.errors import InvalidInputError


class TokenBudgetBatcher:
    """Plans batches of indices whose size stays within ``max_batch_tokens``.

    Args:
        max_batch_tokens: tokens of one forward pass (padded rows × width, or real tokens when packed).
        max_batch_size: sequences of one forward pass.
        max_padding: largest share of padding tokens a padded batch may hold (0.10 = 10%).
    """

    def __init__(
        self, max_batch_tokens: int = 16384, max_batch_size: int = 512, max_padding: float = 0.10
    ) -> None:
        if max_batch_tokens <= 0 or max_batch_size <= 0:
            raise InvalidInputError("max_batch_tokens and max_batch_size must be positive")
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

        ``attention_hidden_size``: packed rows with padded attention (see the module docstring);
        the budget counts real tokens and the cap applies to attention's wasted FLOPs.
        """
        if attention_hidden_size is not None:
            return self._plan_padded_attention(lengths, max_batch_tokens, attention_hidden_size)
        budget = max_batch_tokens or self.max_batch_tokens
        order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
        batches: list[list[int]] = []
        current: list[int] = []
        width = 0  # longest row of the current batch (the first, as rows come longest first)
        real = 0  # real tokens of the current batch
        for i in order:
            n = lengths[i]
            if current:
                rows = len(current) + 1
                size = real + n if packed else width * rows
                too_padded = not packed and (width * rows - real - n) > self.max_padding * width * rows
                if size > budget or rows > self.max_batch_size or too_padded:
                    batches.append(current)
                    current, width, real = [], 0, 0
            current.append(i)
            width = max(width, n)
            real += n
        if current:
            batches.append(current)
        return batches

    def _plan_padded_attention(
        self, lengths: Sequence[int], max_batch_tokens: int | None, hidden: int
    ) -> list[list[int]]:
        budget = max_batch_tokens or self.max_batch_tokens
        order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
        batches: list[list[int]] = []
        current: list[int] = []
        width = real = squares = 0
        for i in order:
            n = lengths[i]
            if current:
                rows = len(current) + 1
                wasted = rows * width * width - squares - n * n
                useful = 6 * hidden * (real + n) + squares + n * n
                if real + n > budget or rows > self.max_batch_size or wasted > self.max_padding * useful:
                    batches.append(current)
                    current, width, real, squares = [], 0, 0, 0
            current.append(i)
            width = max(width, n)
            real += n
            squares += n * n
        if current:
            batches.append(current)
        return batches
