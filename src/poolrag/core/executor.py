"""Execute pooling requests through the engine core, synchronously or from asyncio.

Every front door ends here. The sync API blocks the calling thread on the core's future, so
threads sharing an engine are batched together (and never interleave forward passes on the
model: only the core's worker thread runs it); asyncio callers await the same future without
blocking the event loop, and cancelling the awaiting task drops the work still queued.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

import numpy as np

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.core.engine_core import EngineCore
from poolrag.pooling.task_poolers import TaskPooler
from poolrag.request import PoolingRequest
from poolrag.runner.model_runner import ModelRunner

logger = logging.getLogger(__name__)


class ModelExecutor:
    def __init__(
        self, runner: ModelRunner, poolers: Mapping[str, TaskPooler], batcher: TokenBudgetBatcher
    ) -> None:
        self.core = EngineCore(runner, poolers, batcher)
        # the core's threads hold the core, not this object: closing it when the engine goes away
        # lets the model be freed
        self._finalizer = weakref.finalize(self, EngineCore.close, self.core, 5.0)

    @property
    def runner(self) -> ModelRunner:
        return self.core.runner

    @property
    def poolers(self) -> dict[str, TaskPooler]:
        return self.core.poolers

    @property
    def batcher(self) -> TokenBudgetBatcher:
        return self.core.batcher

    def submit(self, requests: Sequence[PoolingRequest]) -> Future[list[np.ndarray]]:
        return self.core.submit(requests)

    def execute(self, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        """Results in input order; identical requests are computed once and share the result."""
        if not requests:
            return []
        future = self.core.submit(requests)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the work queued
            raise

    async def aexecute(self, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        """Like :meth:`execute`, awaited; cancelling the awaiting task cancels the queued work."""
        if not requests:
            return []
        return await asyncio.wrap_future(self.core.submit(requests))

    def close(self) -> None:
        self._finalizer()
