"""Give the heap's free memory back to the system after a large request.

Tokenising and parsing megabytes of text allocate through glibc's ``malloc`` from several
threads. glibc keeps what is freed in its arenas (and raises its mmap threshold after a large free,
so the next large buffers land in the heap too): a server that took a burst of 16 MB requests sat
at gigabytes idle. :func:`poolrag.native_heap.trim_heap` returns the free pages of every arena;
elsewhere than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.native_heap import heap_tunable, trim_heap

logger = logging.getLogger(__name__)


#: Request bodies larger than this trim the heap once their answer is sent.
TRIM_AFTER_BODY_BYTES = 1 << 20


class HeapTrimMiddleware:
    """Trims the heap (:func:`trim_heap`, on a worker thread) after each request whose body was
    large, once its answer has gone: small requests never pay for it."""

    def __init__(self, app: ASGIApp, min_body_bytes: int = TRIM_AFTER_BODY_BYTES) -> None:
        self.app = app
        self.min_body_bytes = min_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not heap_tunable():
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
