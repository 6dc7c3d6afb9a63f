"""The engine's tasks as the routes call them, without blocking the event loop.

Each task is the engine's async method (``aembed``, ``aclassify``, ``ascore``, ``aencode``), which
batches concurrent requests together and decides what leaves the loop by the one rule
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


class EngineCalls:
    """The engine's tasks as the routes call them (its async methods), and a pool for blocking calls."""

    def __init__(self, engine: InProcessEngine, threads: int) -> None:
        self.engine = engine
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="poolrag-engine")

    async def embed(
        self, prompts: PromptInput | list[PromptInput], params: PoolingParams
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]:
        return await self.engine.aembed(prompts, params)

    async def classify(
        self, prompts: PromptInput | list[PromptInput], params: PoolingParams
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        return await self.engine.aclassify(prompts, params)

    async def score(
        self, text_1: str | list[str], text_2: str | list[str], params: PoolingParams
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        return await self.engine.ascore(text_1, text_2, params)

    async def encode(
        self, prompts: PromptInput | list[PromptInput], task: str, params: PoolingParams
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        return await self.engine.aencode(prompts, task, params)

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
