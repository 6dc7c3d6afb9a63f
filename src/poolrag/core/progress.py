"""Progress of one blocking call's requests, for a front door that draws a bar (vLLM's ``use_tqdm``).

A front door opens :func:`reporting` around an engine call; the executor, which waits for the
call's requests on the caller's thread, tells the callback how many are answered as the engine's
worker answers them (a :class:`Tally` it counts on). A context variable carries the callback, so
every task method reports without a parameter of its own, and the callback runs on the caller's
thread: a bar's code never runs on (or stalls) the engine's worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: (requests answered, requests in the call): called as they are answered, last with both equal
ProgressCallback = Callable[[int, int], None]

_callback: ContextVar[ProgressCallback | None] = ContextVar("poolrag_progress", default=None)


@contextmanager
def reporting(callback: ProgressCallback) -> Iterator[None]:
    """Report the progress of the engine calls made in this block, on this thread, to ``callback``."""
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


def current_callback() -> ProgressCallback | None:
    """The callback of the enclosing :func:`reporting` block, if any."""
    return _callback.get()


class Tally:
    """Requests of one submission answered so far: counted by the engine's worker, read by the
    caller that waits for them (a plain int: one writer, and a reader that may lag a step)."""

    __slots__ = ("answered",)

    def __init__(self) -> None:
        self.answered = 0
