"""Run engine calls without blocking the event loop.

The engine's async core (``aembed``, ``aclassify``, ``ascore``, ``aencode``), when present, batches
concurrent requests together and is used directly; otherwise the thread-safe synchronous methods
run on a small thread pool of their own.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class EngineCalls:
    def __init__(self, engine: Any, threads: int) -> None:
        self.engine = engine
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="poolrag-engine")

    def uses_async_core(self, method: str) -> bool:
        return inspect.iscoroutinefunction(getattr(self.engine, f"a{method}", None))

    async def run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``engine.<method>(*args, **kwargs)``, awaited."""
        if self.uses_async_core(method):
            return await getattr(self.engine, f"a{method}")(*args, **kwargs)
        return await self.offload(getattr(self.engine, method), *args, **kwargs)

    async def offload(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Any blocking call (e.g. tokenising a long text), on the engine's thread pool."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
