"""Give the heap's free memory back to the system after a large request and once the server idles.

Tokenising and parsing megabytes of text allocate through glibc's ``malloc`` from several
threads. glibc keeps what is freed in its arenas (and raises its mmap threshold after a large free,
so the next large buffers land in the heap too): a server that took a burst of 16 MB requests sat
at gigabytes idle. :func:`poolrag.native_heap.trim_heap` returns the free pages of every arena;
elsewhere than glibc (musl, macOS) it does nothing.

A burst of ordinary requests leaves the same kind of residue in small pieces: what the last
answers of the burst freed after the engine's last per-batch trim, Python's collectable cycles and
the tokenizers' word caches. None of it is worth giving back while requests keep coming (the next
one reuses it), so :class:`IdleTrim` gives it back once no request has run for ``idle_s``
seconds, on a worker thread: a request never waits for it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.native_heap import heap_tunable, trim_heap

logger = logging.getLogger(__name__)


#: Request bodies larger than this trim the heap once their answer is sent.
TRIM_AFTER_BODY_BYTES = 1 << 20
#: Methods of requests that do work; probes (``GET /health``, ``/metrics``) do not delay the idle trim.
_WORK_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def clear_tokenizer_caches(tokenizers: Iterable[Any]) -> None:
    """Empty the word caches of fast (``tokenizers``) BPE models, which grow with every new word
    seen; other models (WordPiece, Unigram) and slow tokenizers have none."""
    for tokenizer in tokenizers:
        model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
        clear = getattr(model, "_clear_cache", None)
        if callable(clear):
            clear()


class IdleTrim:
    """Gives memory back once the server has run no request for ``idle_s`` seconds: Python's
    cycles collected, the tokenizers' caches emptied, the heap trimmed; once per idle spell."""

    def __init__(self, idle_s: float, tokenizers: Callable[[], Iterable[Any]] = tuple) -> None:
        self.idle_s = idle_s
        self.tokenizers = tokenizers
        self.running = 0  # requests in progress
        self.last_active = time.monotonic()
        self.trims = 0  # idle spells that ended in a trim (tests and logs read it)
        self._work = asyncio.Event()  # set by a request after the last trim

    def started(self) -> None:
        self.running += 1
        self._work.set()

    def finished(self) -> None:
        self.running -= 1
        self.last_active = time.monotonic()

    def release(self) -> None:
        """What one idle trim does (on a worker thread)."""
        gc.collect()
        clear_tokenizer_caches(self.tokenizers())
        trim_heap()

    async def run(self) -> None:
        """Wait for requests, then for ``idle_s`` seconds without one, then release; for ever.

        Each run waits on an event of its own loop (an app whose lifespan starts again, on another
        loop, runs again), and a release that fails is logged, never the end of the trimming."""
        work, self._work = self._work, asyncio.Event()
        if work.is_set():
            self._work.set()
        while True:
            await self._work.wait()
            while True:
                wait = self.last_active + self.idle_s - time.monotonic()
                if self.running == 0 and wait <= 0:
                    break
                await asyncio.sleep(max(wait, 0.0) if self.running == 0 else self.idle_s)
            self._work.clear()
            try:
                await asyncio.to_thread(self.release)
            except Exception:  # a trim is housekeeping: the server goes on without it
                logger.warning("idle memory trim failed", exc_info=True)
                continue
            self.trims += 1
            logger.debug("idle for %.0f s: memory given back", self.idle_s)


class HeapTrimMiddleware:
    """Trims the heap (:func:`trim_heap`, on a worker thread) after each request whose body was
    large, once its answer has gone: small requests never pay for it. Every request that does work
    is reported to ``idle``, which trims once the server idles."""

    def __init__(self, app: ASGIApp, idle: IdleTrim) -> None:
        self.app = app
        self.idle = idle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        idle = self.idle if scope.get("method") in _WORK_METHODS else None
        if idle is not None:
            idle.started()
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
            return message

        try:
            await self.app(scope, counting_receive, send)
        finally:
            if received > TRIM_AFTER_BODY_BYTES and heap_tunable():
                await asyncio.to_thread(trim_heap)
            if idle is not None:
                idle.finished()
