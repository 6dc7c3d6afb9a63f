"""One lock per tokenizer object, held around every call poolrag makes into it.

A Hugging Face fast tokenizer keeps its truncation and padding settings on the one Rust tokenizer
it wraps: each call first sets them, then encodes. Two threads tokenising at once (an engine shared
by threads, a server tokenising requests off its event loop, an ingest chunking beside the engine)
could each encode under the other's settings: a request for 8 tokens embedded at 48, a call without
truncation cut short, with no error. Holding one lock per tokenizer across both steps makes each call
see its own settings; the Rust side still encodes a batch on all cores, so little is lost.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

from poolrag.fork_holds import hold_over_fork

_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_REGISTRY = threading.Lock()


def _held_over_fork() -> Iterator[threading.Lock]:
    """The registry (held still while read), then every tokenizer's lock: a fork waits for the calls
    in flight. A thread encoding at the fork does not exist in the child, and the Rust tokenizer it
    was reading stayed locked there: the child's first call, which sets truncation, waited forever
    (10 forks in 10 beside a thread tokenising). No call here holds one tokenizer's lock while
    taking another's."""
    yield _REGISTRY
    yield from list(_LOCKS.values())


hold_over_fork(_held_over_fork)


def tokenizer_lock(tokenizer: Any) -> threading.Lock:
    """The lock of ``tokenizer`` (one per object, made on first use, dropped with the object)."""
    with _REGISTRY:
        lock = _LOCKS.get(tokenizer)
        if lock is None:
            lock = _LOCKS[tokenizer] = threading.Lock()
        return lock


def call_tokenizer(tokenizer: Any, *args: Any, **kwargs: Any) -> Any:
    """``tokenizer(*args, **kwargs)`` under its lock: the settings this call makes are the ones it
    encodes with."""
    with tokenizer_lock(tokenizer):
        return tokenizer(*args, **kwargs)
