"""A worker forked while a thread of this process holds one of poolrag's locks.

What a ``fork`` Pool meets in an app whose other thread is in the middle of a model build or a
tokenizer's cut: the thread holds the lock for a second, as one inside that work would, and the
fork happens while it does. The child's answer is returned, for the test to compare.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from poolrag.fork_holds import Lockable

_R = TypeVar("_R")


def in_fork_while_held(
    lock: Lockable, function: Callable[..., _R], *args: Any, timeout: float = 120, held_s: float = 1
) -> _R:
    """``function(*args)`` run in a forked worker while a thread holds ``lock`` for ``held_s`` s;
    fails with ``multiprocessing.TimeoutError`` after ``timeout`` s if the worker hangs."""
    holding = threading.Event()

    def hold() -> None:
        lock.acquire()
        try:
            holding.set()
            time.sleep(held_s)
        finally:
            lock.release()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        holding.wait(30)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            return pool.apply_async(function, args).get(timeout=timeout)
    finally:
        holder.join()
