"""Every door that takes a count refuses ``True``, ``0``, negatives and fractions the same way: one
line naming the argument, before anything is built from it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.counts import check_count, check_optional_count
from poolrag.errors import InvalidInputError
from poolrag.ingest.chunker import TokenChunker
from poolrag.ingest.pipeline import IngestPipeline
from poolrag.stores.retry import RetryPolicy

NOT_COUNTS = [True, 0, -3, 2.5, "4"]


@pytest.mark.parametrize("value", NOT_COUNTS)
def test_check_count_refuses_what_is_not_a_positive_integer(value: object) -> None:
    with pytest.raises(InvalidInputError, match=rf"^k must be a positive integer, not {value!r}$"):
        check_count(value, "k")


def test_check_count_takes_numpy_integers_as_plain_ints() -> None:
    got = check_count(np.int64(7), "k")
    assert got == 7 and type(got) is int
    assert check_optional_count(None, "k") is None


DOORS: dict[str, tuple[str, Callable[[object], object]]] = {
    "TokenBudgetBatcher tokens": ("max_batch_tokens", lambda v: TokenBudgetBatcher(max_batch_tokens=v)),
    "TokenBudgetBatcher size": ("max_batch_size", lambda v: TokenBudgetBatcher(max_batch_size=v)),
    "CachedEmbedder": ("batch_size", lambda v: CachedEmbedder(None, batch_size=v)),
    "EmbeddingCache": ("max_bytes", lambda v: EmbeddingCache(":memory:", max_bytes=v)),
    "PoolragClient inputs": (
        "max_inputs_per_request",
        lambda v: PoolragClient("http://127.0.0.1:9", max_inputs_per_request=v),
    ),
    "PoolragClient concurrency": (
        "max_concurrency",
        lambda v: PoolragClient("http://127.0.0.1:9", max_concurrency=v),
    ),
    "TokenChunker": (r"chunk size \(max_tokens\)", lambda v: TokenChunker(None, max_tokens=v)),
    "IngestPipeline": ("batch_size", lambda v: IngestPipeline(None, None, None, batch_size=v)),
    "RetryPolicy": ("attempts", lambda v: RetryPolicy(attempts=v)),
}


@pytest.mark.parametrize("value", [True, 0, 2.5])
@pytest.mark.parametrize("door", sorted(DOORS))
def test_each_door_refuses_a_bad_count_naming_its_argument(door: str, value: object) -> None:
    name, build = DOORS[door]
    with pytest.raises(InvalidInputError, match=rf"^{name} must be a positive integer"):
        build(value)
