"""One ``httpx.AsyncClient`` per event loop, each closed before its loop is.

An AsyncClient's connections belong to the loop that opened them, so a caller that runs several
loops (``asyncio.run`` per call, a loop per thread) needs a client per loop. A client left open
when its loop closes leaks its sockets (``ResourceWarning: unclosed transport``), and once the
loop is closed nothing can close them cleanly any more. So each client comes with an async
generator parked in its loop: asyncio finalises a loop's async generators before closing it
(``asyncio.run`` and ``loop.shutdown_asyncgens()``), and that generator's ``finally`` closes the
client on its own loop. :meth:`LoopClients.close` closes those whose loops are still open.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import AsyncGenerator, Callable

import httpx

logger = logging.getLogger(__name__)

#: Seconds :meth:`LoopClients.close` waits for a client on a loop running in another thread.
CLOSE_TIMEOUT_S = 10.0


class LoopClients:
    """The AsyncClient of the running loop, made by ``make`` on a loop's first request."""

    def __init__(self, make: Callable[[], httpx.AsyncClient]) -> None:
        self._make = make
        # Keyed weakly: a loop that is gone takes its (closed) client with it.
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._closing: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak refs

    async def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._by_loop.get(loop)
            if entry is not None and not entry[0].is_closed:
                return entry[0]
            client = self._make()
            guard = self._closed_with_loop(client)
            self._by_loop[loop] = (client, guard)
        await guard.__anext__()  # parks it in this loop, which finalises it before closing
        return client

    async def _closed_with_loop(self, client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            # Forget the loop too: this generator holds it (asyncio's finaliser hook), and the
            # entry holds this generator, so the entry would keep every finished loop alive.
            loop = asyncio.get_running_loop()
            with self._lock:
                entry = self._by_loop.get(loop)
                if entry is not None and entry[0] is client:
                    del self._by_loop[loop]
            await client.aclose()

    async def aclose_current(self) -> None:
        """Close the running loop's client now."""
        with self._lock:
            entry = self._by_loop.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[1].aclose()

    def close(self) -> None:
        """Close every client whose loop is still open; blocks for loops in other threads.

        Called from inside a running loop, that loop's own client is closed by a task instead.
        """
        with self._lock:
            entries = list(self._by_loop.items())
            self._by_loop.clear()
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, (_client, guard) in entries:
            if loop.is_closed():
                continue  # finalised with the loop, or beyond reach
            if loop is current:
                task = loop.create_task(guard.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(guard.aclose(), loop)
                try:
                    future.result(CLOSE_TIMEOUT_S)
                except Exception as exc:  # a busy or dying loop: its shutdown closes it instead
                    logger.warning("could not close an HTTP client on another event loop: %s", exc)
            else:
                loop.run_until_complete(guard.aclose())
