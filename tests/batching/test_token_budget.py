"""The batcher: every item exactly once, within budget, longest first, little padding."""

from __future__ import annotations

import random

import pytest

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.errors import InvalidInputError


def _mixed_lengths(n: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice((rng.randint(4, 12), rng.randint(20, 90), rng.randint(150, 500))) for _ in range(n)]


def test_every_index_lands_in_exactly_one_batch() -> None:
    lengths = _mixed_lengths(500)
    batches = TokenBudgetBatcher(max_batch_tokens=2048).plan(lengths)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))


def test_padded_batches_stay_within_the_padded_token_budget() -> None:
    lengths = _mixed_lengths(500)
    for batch in TokenBudgetBatcher(max_batch_tokens=2048).plan(lengths):
        assert len(batch) * max(lengths[i] for i in batch) <= 2048


def test_batches_run_longest_first_and_rows_are_sorted() -> None:
    lengths = _mixed_lengths(300, seed=1)
    batches = TokenBudgetBatcher(max_batch_tokens=4096).plan(lengths)
    order = [lengths[i] for b in batches for i in b]
    assert order == sorted(order, reverse=True)


def test_padding_share_is_capped() -> None:
    # one long passage with many short queries: padding them all to 500 tokens would be 95% waste
    lengths = [500] + [10] * 40
    batches = TokenBudgetBatcher(max_batch_tokens=100_000, max_padding=0.25).plan(lengths)
    assert batches[0] == [0]
    for batch in batches:
        width = max(lengths[i] for i in batch)
        real = sum(lengths[i] for i in batch)
        assert width * len(batch) - real <= 0.25 * width * len(batch)


def test_packed_batches_count_real_tokens_and_ignore_padding() -> None:
    lengths = [500] + [10] * 40
    batches = TokenBudgetBatcher(max_batch_tokens=1000).plan(lengths, packed=True)
    assert batches == [list(range(41))]  # 900 real tokens fit one packed batch
    for batch in TokenBudgetBatcher(max_batch_tokens=600).plan(lengths, packed=True):
        assert sum(lengths[i] for i in batch) <= 600


def _attention_waste(lengths: list[int], batch: list[int], hidden: int) -> float:
    width = max(lengths[i] for i in batch)
    squares = sum(lengths[i] ** 2 for i in batch)
    useful = 6 * hidden * sum(lengths[i] for i in batch) + squares
    return (len(batch) * width * width - squares) / useful


def test_attention_only_padding_keeps_short_texts_of_different_lengths_together() -> None:
    """Native CPU encoders pad only inside attention: 4..12-token queries cost nothing to mix."""
    lengths = [4 + i % 9 for i in range(300)]
    batcher = TokenBudgetBatcher(max_batch_tokens=16384)
    assert len(batcher.plan(lengths)) > 1  # the padded layout cuts at every few lengths
    assert batcher.plan(lengths, attention_hidden_size=384) == [sorted(range(300), key=lambda i: -lengths[i])]


def test_attention_only_padding_caps_wasted_attention_flops() -> None:
    # with a tiny hidden size attention dominates, so a long passage must not pad 40 queries
    lengths = [500] + [10] * 40 + _mixed_lengths(200)
    batches = TokenBudgetBatcher(max_batch_tokens=4096, max_padding=0.1).plan(
        lengths, attention_hidden_size=8
    )
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert sum(lengths[i] for i in batch) <= 4096 or len(batch) == 1
        assert len(batch) == 1 or _attention_waste(lengths, batch, 8) <= 0.1


def test_an_item_over_budget_gets_a_batch_of_its_own() -> None:
    batches = TokenBudgetBatcher(max_batch_tokens=100).plan([300, 20, 20])
    assert batches[0] == [0]
    assert sorted(i for b in batches for i in b) == [0, 1, 2]


def test_budget_override_and_batch_size_limit() -> None:
    batcher = TokenBudgetBatcher(max_batch_tokens=10_000, max_batch_size=4)
    batches = batcher.plan([8] * 10)
    assert [len(b) for b in batches] == [4, 4, 2]
    smaller = batcher.plan([8] * 10, max_batch_tokens=16)
    assert all(len(b) <= 2 for b in smaller)


def test_empty_input_plans_nothing() -> None:
    assert TokenBudgetBatcher().plan([]) == []


@pytest.mark.parametrize(
    "kwargs", [{"max_batch_tokens": 0}, {"max_batch_size": 0}, {"max_padding": 1.0}, {"max_padding": -0.1}]
)
def test_invalid_settings_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError):
        TokenBudgetBatcher(**kwargs)  # type: ignore[arg-type]
