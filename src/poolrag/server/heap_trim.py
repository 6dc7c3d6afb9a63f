"""Give the heap's free memory back to the system after a large request.

Tokenising and parsing megabytes of text allocate through glibc's ``malloc`` from several
threads. glibc keeps what is freed in its arenas (and raises its mmap threshold after a large free,
so the next large buffers land in the heap too): a server that took a burst of 16 MB requests sat
at gigabytes idle. ``malloc_trim(0)`` returns the free pages of every arena; elsewhere than glibc
(musl, macOS) :func:`trim_heap` does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import sys
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)


def _load_malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the libc this process already runs on
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_MALLOC_TRIM = _load_malloc_trim()


def trim_heap() -> bool:
    """Return free heap pages to the system; ``False`` where the C library cannot."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


#: Request bodies larger than this trim the heap once their answer is sent.
TRIM_AFTER_BODY_BYTES = 1 << 20


class HeapTrimMiddleware:
    """Trims the heap (:func:`trim_heap`, on a worker thread) after each request whose body was
    large, once its answer has gone: small requests never pay for it."""

    def __init__(self, app: ASGIApp, min_body_bytes: int = TRIM_AFTER_BODY_BYTES) -> None:
        self.app = app
        self.min_body_bytes = min_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _MALLOC_TRIM is None:
            await self.app(scope, receive, send)
            return
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
            if received > self.min_body_bytes:
                await asyncio.to_thread(trim_heap)
