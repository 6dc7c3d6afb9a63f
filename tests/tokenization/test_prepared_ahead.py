"""A call's inputs are prepared on a pool a bounded number ahead of the one waited for."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait

import pytest

from poolrag.tokenization.prepared_ahead import prepared_ahead


def test_inputs_start_in_order_at_most_ahead_past_the_one_asked_for() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def prepare(item: int) -> int:
        with lock:
            started.append(item)
        return item * 10

    with ThreadPoolExecutor(4) as pool:
        futures = prepared_ahead(pool, prepare, range(20), ahead=3)
        assert futures[2].result() == 20  # 0..2 started at once; asking for 2 starts up to 5
        futures[5].result()  # asking for 5 starts through 8, no further
        wait(futures[6:9])
        with lock:
            assert sorted(started) == list(range(9))
        assert not futures[9].running() and not futures[9].done()
        assert [f.result() for f in futures] == [i * 10 for i in range(20)]


def test_a_future_cancelled_before_it_starts_never_runs_and_an_error_is_raised_where_awaited() -> None:
    ran: list[int] = []

    def prepare(item: int) -> int:
        ran.append(item)
        if item == 1:
            raise ValueError("input[1]: not a readable image")
        return item

    with ThreadPoolExecutor(2) as pool:
        futures = prepared_ahead(pool, prepare, range(10), ahead=2)
        with pytest.raises(ValueError, match=r"input\[1\]"):
            futures[1].result()
        assert all(future.cancel() for future in futures[4:])  # asking for 1 started 2 and 3 only
    assert set(ran) <= {0, 1, 2, 3}  # the cancelled ones never ran
