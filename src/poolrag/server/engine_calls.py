"""Run engine calls without blocking the event loop.

The engine's async core (``aembed``, ``aclassify``, ``ascore``, ``aencode``) batches concurrent
requests together and is used directly. Requests carrying a lot of text take a small thread
pool running the engine's thread-safe synchronous methods instead (they feed the same core, so
they are still batched with everyone else): the async methods tokenise requests of up to
``ASYNC_INLINE_ITEMS`` inputs on the event loop, and megabytes of text in those would stall
every other connection meanwhile. Requests with more inputs always take the async core, which
tokenises them on a thread of its own: only the async core drops a cancelled caller's work (a
client that disconnected), so the thread-pool path is kept for the few-inputs case, where little
work can be left behind.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from poolrag.backend import InProcessEngine
    from poolrag.outputs import (
        ClassificationOutput,
        EmbeddingOutput,
        PoolingOutput,
        PoolingRequestOutput,
        ScoringOutput,
    )
    from poolrag.params import PoolingParams
    from poolrag.tokenization.input_processor import PromptInput

T = TypeVar("T")
P = ParamSpec("P")

#: Above this many characters of text, a request is tokenised on the thread pool, not the loop.
INLINE_TEXT_CHARS = 100_000


def most_items(args: tuple[Any, ...]) -> int:
    """The longest list among an engine call's arguments (1 when none is a list)."""
    return max((len(arg) for arg in args if isinstance(arg, list)), default=1)


def text_chars(args: tuple[Any, ...]) -> int:
    """Characters of text in an engine call's arguments (strings and lists of strings)."""
    total = 0
    for arg in args:
        if isinstance(arg, str):
            total += len(arg)
        elif isinstance(arg, list):
            total += sum(len(item) for item in arg if isinstance(item, str))
    return total


class EngineCalls:
    """The engine's tasks as the routes call them: each picks the engine's async method or its
    sync twin on the thread pool (see the module's docstring), through bound methods."""

    def __init__(self, engine: InProcessEngine, threads: int) -> None:
        self.engine = engine
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="poolrag-engine")

    async def embed(
        self, prompts: list[PromptInput], params: PoolingParams
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]:
        return await self._run(self.engine.embed, self.engine.aembed, prompts, params)

    async def classify(
        self, prompts: list[PromptInput], params: PoolingParams
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        return await self._run(self.engine.classify, self.engine.aclassify, prompts, params)

    async def score(
        self, text_1: str | list[str], text_2: str | list[str], params: PoolingParams
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        return await self._run(self.engine.score, self.engine.ascore, text_1, text_2, params)

    async def encode(
        self, prompts: list[PromptInput], task: str, params: PoolingParams
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        return await self._run(self.engine.encode, self.engine.aencode, prompts, task, params)

    async def embed_chunks(
        self, document: str, spans: list[tuple[int, int]], params: PoolingParams
    ) -> tuple[np.ndarray, int]:
        """Late chunking's vectors and the document's token count (tokenised off the loop)."""
        vectors = await self._run(
            self.engine.embed_chunks, self.engine.aembed_chunks, document, spans, params
        )
        return vectors, len(await self.offload(self.engine.tokenize, document))

    async def _run(
        self,
        blocking: Callable[P, T],
        awaitable: Callable[P, Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``awaitable(*args)`` on the engine's async core, or ``blocking(*args)`` on the pool for
        few inputs carrying a lot of text."""
        from poolrag.engine import ASYNC_INLINE_ITEMS  # loaded already: the engine is running

        if most_items(args) > ASYNC_INLINE_ITEMS or text_chars(args) <= INLINE_TEXT_CHARS:
            return await awaitable(*args, **kwargs)
        return await self.offload(blocking, *args, **kwargs)

    async def offload(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Any blocking call (e.g. tokenising a long text), on the engine's thread pool."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
