"""A call's inputs prepared on a pool of threads a few ahead of the one the engine waits for.

Submitting all of a call's images at once kept every one's pixels (600 KB each at CLIP's 224 x
224) until the call returned: 2,048 tiny PNGs in one request held 1.2 GB. Here the pool starts an
input only when the engine has asked for one at most ``AHEAD`` before it, so the threads stay busy
while the model runs and what is prepared but not yet taken stays bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


def prepared_ahead(
    pool: ThreadPoolExecutor, prepare: Callable[[In], Out], items: Sequence[In], ahead: int
) -> list[Future[Out]]:
    """``prepare(item)`` for each item, as futures started in order, ``ahead`` past the furthest one
    whose result has been asked for. A future not yet started can be cancelled and never runs."""
    window = _Window(pool, prepare, items, ahead)
    futures: list[Future[Out]] = [_Awaited(window, i) for i in range(len(items))]
    window.waiting = list(futures)
    window.start_through(ahead - 1)
    return futures


class _Window(Generic[In, Out]):
    def __init__(
        self, pool: ThreadPoolExecutor, prepare: Callable[[In], Out], items: Sequence[In], ahead: int
    ) -> None:
        self._pool = pool
        self._prepare = prepare
        # each dropped when started: the window holds no input or result it has handed on, and the
        # caller's futures (whose results are the pixels) are not kept alive by it
        self._items: list[In | None] = list(items)
        self.waiting: list[Future[Out] | None] = []
        self._ahead = ahead
        self._started = 0
        self._lock = threading.Lock()

    def start_through(self, index: int) -> None:
        with self._lock:
            stop = min(index + 1, len(self.waiting))
            for i in range(self._started, stop):
                future, item = self.waiting[i], self._items[i]
                self.waiting[i] = self._items[i] = None
                self._pool.submit(self._run, future, item)
            self._started = max(self._started, stop)

    def asked_for(self, index: int) -> None:
        self.start_through(index + self._ahead)

    def _run(self, future: Future[Out], item: In) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(self._prepare(item))
        except BaseException as exc:  # the caller's error, raised where it waits
            future.set_exception(exc)


class _Awaited(Future[Out]):
    """A future that, when its result is asked for, starts the preparation of those after it."""

    def __init__(self, window: _Window[Any, Out], index: int) -> None:
        super().__init__()
        self._window = window
        self._index = index

    def result(self, timeout: float | None = None) -> Out:
        self._window.asked_for(self._index)
        return super().result(timeout)
