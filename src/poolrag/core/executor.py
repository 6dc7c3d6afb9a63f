"""Execute pooling requests through the engine core, synchronously or from asyncio.

Every front door ends here. The sync API blocks the calling thread on the core's future, so
threads sharing an engine are batched together (and never interleave forward passes on the
model: only the core's worker thread runs it); asyncio callers await the same future without
blocking the event loop, and cancelling the awaiting task drops the work still queued. Chunked
inputs (long embed inputs, see ``ChunkedRequest``) run as their chunks and are joined here.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import numpy as np

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.core.engine_core import EngineCore
from poolrag.core.progress import ProgressCallback, Tally, current_callback
from poolrag.pooling.matryoshka import truncate
from poolrag.pooling.task_poolers import TaskPooler
from poolrag.request import PoolingRequest
from poolrag.runner.model_runner import ModelRunner
from poolrag.tokenization.chunked_inputs import ChunkedRequest

logger = logging.getLogger(__name__)

# which flat results make up each request: (start, count, chunked request or None)
_Plan = list[tuple[int, int, ChunkedRequest | None]]
#: requests a call hands to the core at a time while the rest are still being prepared
READY_PART = 32
#: a call's prepared requests waiting in the core at most, in batches' worth of tokens: the next
#: batch is ready when one ends, and the rest of a long call's images are not held meanwhile
QUEUED_BATCHES = 2
#: how often a call with a progress callback looks at how many of its requests are answered
PROGRESS_POLL_S = 0.1
#: threads an engine's asyncio callers prepare a call on when it is too big for the event loop (as
#: many as asyncio's default executor has): the engine's own, so one model's backlog never queues
#: another model's work, and closing an engine never waits behind anyone's tokenising
OFF_LOOP_THREADS = min(32, (os.cpu_count() or 1) + 4)
T = TypeVar("T")


def _expand(requests: Sequence[PoolingRequest]) -> tuple[list[PoolingRequest], _Plan | None]:
    """The requests the core runs: chunked ones replaced by their chunks (None: nothing chunked)."""
    if not any(isinstance(r, ChunkedRequest) for r in requests):
        return list(requests), None
    flat: list[PoolingRequest] = []
    plan: _Plan = []
    for request in requests:
        if isinstance(request, ChunkedRequest):
            plan.append((len(flat), len(request.chunks), request))
            flat.extend(request.chunks)
        else:
            plan.append((len(flat), 1, None))
            flat.append(request)
    return flat, plan


def join_chunks(request: ChunkedRequest, vectors: Sequence[np.ndarray]) -> np.ndarray:
    """Mean of the chunk vectors weighted by each chunk's pooled token count (vLLM's aggregation;
    a prompt the pool leaves out is not counted), then the request's Matryoshka size and
    normalisation as the embedding head applies them: a smaller size cut from the full float32
    vector, as the embedding cache cuts it."""
    weights = np.array([len(c.token_ids) - c.prompt_length for c in request.chunks], dtype=np.float64)
    mean = (np.stack(vectors).astype(np.float64) * weights[:, None]).sum(0) / weights.sum()
    normalize = request.params.normalize
    full = truncate(mean, None, normalize).astype(np.float32)
    dims = request.params.dimensions
    return full if dims is None or dims >= full.shape[-1] else truncate(full, dims, normalize)


def _join(results: list[np.ndarray], plan: _Plan | None) -> list[np.ndarray]:
    if plan is None:
        return results
    return [
        results[start] if chunked is None else join_chunks(chunked, results[start : start + count])
        for start, count, chunked in plan
    ]


def _wait_reporting(future: Future[Any], tally: Tally, total: int, report: ProgressCallback) -> None:
    """Wait for ``future``, telling ``report`` each time more of its ``total`` requests are answered
    (polled: the callback runs here, on the caller's thread, never on the engine's worker)."""
    shown = 0
    while not wait([future], timeout=PROGRESS_POLL_S).done:
        if tally.answered != shown:
            shown = tally.answered
            report(shown, total)
    if future.exception() is None:
        report(total, total)


def _outcome(future: Future[T], caller_left: Future[None] | None) -> T:
    """``future``'s result, or CancelledError as soon as ``caller_left`` is cancelled."""
    if caller_left is not None:
        wait([future, caller_left], return_when=FIRST_COMPLETED)
        if caller_left.cancelled():
            raise CancelledError
    return future.result()


class ModelExecutor:
    def __init__(
        self, runner: ModelRunner, poolers: Mapping[str, TaskPooler], batcher: TokenBudgetBatcher
    ) -> None:
        self.core = EngineCore(runner, poolers, batcher)
        # the core's threads hold the core, not this object: closing it when the engine goes away
        # lets the model be freed
        self._finalizer = weakref.finalize(self, EngineCore.close, self.core, 5.0)
        self._off_loop: ThreadPoolExecutor | None = None
        self._off_loop_pid = 0
        self._off_loop_lock = threading.Lock()

    @property
    def runner(self) -> ModelRunner:
        return self.core.runner

    @property
    def poolers(self) -> dict[str, TaskPooler]:
        return self.core.poolers

    @property
    def batcher(self) -> TokenBudgetBatcher:
        return self.core.batcher

    def execute(self, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        """Results in input order; identical requests are computed once and share the result."""
        if not requests:
            return []
        flat, plan = _expand(requests)
        report = current_callback()
        tally = None if report is None else Tally()
        future = self.core.submit(flat, tally)
        try:
            if report is not None and tally is not None:
                _wait_reporting(future, tally, len(flat), report)
            return _join(future.result(), plan)
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the work queued
            raise

    def execute_as_ready(
        self, requests: list[PoolingRequest | Future[PoolingRequest]], caller_left: Future[None] | None = None
    ) -> list[np.ndarray]:
        """Results in input order for requests of which some are still being prepared (a call's
        images, on a pool of threads): each ``READY_PART`` of them goes to the core as soon as it is
        ready, so the forward passes of the first images overlap the preparation of the rest. At most
        ``QUEUED_BATCHES`` batches' worth of tokens wait in the core, and an answered image keeps
        its identity and patch count, not its pixels: a call's memory does not grow with its length.
        The futures in ``requests`` are replaced by their requests; the first one that fails, in
        order, is the error, and what the call had queued is dropped, as it is once ``caller_left`` is
        cancelled (the caller that waits on another thread left: CancelledError)."""
        parts: list[tuple[Future[list[np.ndarray]], _Plan | None]] = []
        queued: deque[tuple[int, int, int]] = deque()  # (part, first request, tokens) not yet answered
        room = QUEUED_BATCHES * self.batcher.max_batch_tokens
        try:
            for start in range(0, len(requests), READY_PART):
                stop = min(start + READY_PART, len(requests))
                for i in range(start, stop):
                    pending = requests[i]
                    if isinstance(pending, Future):
                        requests[i] = _outcome(pending, caller_left)
                part: list[PoolingRequest] = requests[start:stop]  # type: ignore[assignment]
                tokens = sum(request.num_tokens for request in part)
                while queued and sum(t for _, _, t in queued) + tokens > room:
                    done, first, _ = queued.popleft()
                    _outcome(parts[done][0], caller_left)
                    for i in range(first, min(first + READY_PART, len(requests))):  # answered: no pixels
                        requests[i] = requests[i].answered()  # type: ignore[union-attr]
                flat, plan = _expand(part)
                queued.append((len(parts), start, tokens))
                parts.append((self.core.submit(flat), plan))
            return [vector for future, plan in parts for vector in _join(_outcome(future, caller_left), plan)]
        except BaseException:
            for pending in requests:
                if isinstance(pending, Future):
                    pending.cancel()
            for future, _ in parts:
                future.cancel()
            raise

    async def aexecute(self, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        """Like :meth:`execute`, awaited; cancelling the awaiting task cancels the queued work."""
        if not requests:
            return []
        flat, plan = _expand(requests)
        return _join(await asyncio.wrap_future(self.core.submit(flat)), plan)

    async def aexecute_as_ready(
        self, requests: list[PoolingRequest | Future[PoolingRequest]]
    ) -> list[np.ndarray]:
        """:meth:`execute_as_ready` on this engine's threads, awaited; cancelling the awaiting task
        stops it and drops what it queued (the thread would otherwise send every image on)."""
        caller_left: Future[None] = Future()
        try:
            return await self.off_loop(lambda: self.execute_as_ready(requests, caller_left))
        finally:
            caller_left.cancel()

    async def off_loop(self, work: Callable[[], T]) -> T:
        """``work()`` on this engine's own threads, awaited without blocking the event loop."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._threads(), context.run, work)

    def _threads(self) -> ThreadPoolExecutor:
        with self._off_loop_lock:
            if self._off_loop is None or self._off_loop_pid != os.getpid():  # a forked child has none
                self._off_loop = ThreadPoolExecutor(OFF_LOOP_THREADS, thread_name_prefix="poolrag-off-loop")
                self._off_loop_pid = os.getpid()
            return self._off_loop

    def close(self) -> None:
        self._finalizer()
        if self._off_loop is not None:
            self._off_loop.shutdown(wait=False, cancel_futures=True)
