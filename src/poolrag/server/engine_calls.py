"""What the routes run besides the engine's async methods, without blocking the event loop.

The routes call the engine's async methods (``aembed``, ``aclassify``, ``ascore``, ``aencode``)
themselves: each batches concurrent requests together and decides what leaves the loop by the one rule
(:func:`poolrag.loop_work.stays_on_loop`: a request of many inputs or much text is tokenised on a
thread), and a cancelled caller's queued work (a client that disconnected) is
dropped. Other blocking calls (tokenising for ``/tokenize``) take this module's small thread pool.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from poolrag.tokenization.tokenizer_lock import call_tokenizer

if TYPE_CHECKING:
    import numpy as np

    from poolrag.backend import InProcessEngine
    from poolrag.params import PoolingParams

T = TypeVar("T")
P = ParamSpec("P")


class EngineCalls:
    """Late chunking with its token count, and a pool for blocking calls."""

    def __init__(self, engine: InProcessEngine, threads: int) -> None:
        self.engine = engine
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="poolrag-engine")

    async def embed_chunks(
        self, document: str, spans: list[tuple[int, int]], params: PoolingParams
    ) -> tuple[np.ndarray, int]:
        """Late chunking's vectors and the document's token count (tokenised off the loop)."""
        vectors = await self.engine.aembed_chunks(document, spans, params)
        ids = await self.offload(call_tokenizer, self.engine.tokenizer, document)  # checked by the engine
        return vectors, len(ids["input_ids"])

    async def offload(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Any blocking call (e.g. tokenising a long text), on the engine's thread pool."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
