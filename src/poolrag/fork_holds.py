"""Locks a fork waits for, so that a child process never starts with one held.

A thread inside a lock at ``os.fork`` does not exist in the child: there the lock stays held forever,
and what the thread was changing under it (a Rust tokenizer's settings, SQLite's own state, a model
build's patches to transformers) stays half changed. Handing the child fresh locks frees the lock but
not that state, so a forked worker hung on its first call. Holding each lock over the fork instead
waits for the work in flight to finish; parent and child then both go on with it released.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Protocol


class Lockable(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


def hold_over_fork(locks: Callable[[], Iterable[Lockable]]) -> None:
    """Before every fork take each lock ``locks()`` yields, in order, and release them after it in
    parent and child. ``locks`` runs at each fork, so it names locks made since; a lock it yields is
    already held when it yields the next (a registry's lock first keeps the registry still)."""
    held: list[Lockable] = []

    def before() -> None:
        for lock in locks():
            lock.acquire()
            held.append(lock)

    def after() -> None:
        while held:
            held.pop().release()

    os.register_at_fork(before=before, after_in_parent=after, after_in_child=after)
