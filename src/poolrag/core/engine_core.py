"""The asynchronous engine core: one worker thread owns the model, any number of callers submit.

Callers (threads, asyncio tasks, server requests) tokenise on their own threads and hand
:class:`PoolingRequest` lists to :meth:`EngineCore.submit`, getting a ``concurrent.futures.Future``
back. The pipeline behind it has two stages, each a thread, so the model never waits on Python:

1. **scheduler/forward** (the worker): takes everything queued, forms the next batch from a
   window at the head of the queue (sorted by length, cut by the token budget), builds its input
   tensors and runs the forward pass;
2. **post-processing**: pools, applies the head, makes the one device→host copy per batch and
   hands each caller its rows, while the worker already runs the next forward pass.

Scheduling takes callers in turn: each batch is built around the oldest queued request of the next
caller with work (then filled from everyone's queued requests of similar length), so a query sent
behind a 1,500-text ingestion call waits about one batch rather than the whole call, and concurrent
single-text callers are still batched together. Identical requests queued at the same time are
computed once. A caller that cancels its future has its queued work dropped before it reaches the
model.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from queue import Queue
from typing import Any, TypeVar

import numpy as np
import torch

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.core.progress import Tally
from poolrag.errors import EngineClosedError, OutOfMemoryError
from poolrag.native_heap import batch_finished
from poolrag.pooling.task_poolers import TaskPooler
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput
from poolrag.runner.model_runner import ModelRunner
from poolrag.runner.oom import is_out_of_memory, too_big_alone

logger = logging.getLogger(__name__)

T = TypeVar("T")

# work run between batches (``run_between_batches``) waits this long for the queue to empty before
# it runs ahead of the next batch anyway, so a busy engine still gets to it
CHORE_PATIENCE_S = 2.0
#: how many batches' worth of the queue head are sorted together into the next batch
WINDOW_BATCHES = 4


class _Job:
    """One caller's submission: a future and a result slot per request, in input order."""

    __slots__ = ("future", "results", "tally", "waiting")

    def __init__(self, future: Future[list[np.ndarray]], size: int, tally: Tally | None = None) -> None:
        self.future = future
        self.results: list[np.ndarray | None] = [None] * size
        self.waiting = size
        self.tally = tally

    @property
    def live(self) -> bool:
        return not self.future.done()

    def deliver(self, index: int, value: np.ndarray) -> None:
        self.results[index] = value
        self.waiting -= 1
        if self.tally is not None:
            self.tally.answered += 1
        if self.waiting == 0 and self.live:
            with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
                self.future.set_result(self.results)  # type: ignore[arg-type]

    def fail(self, exc: BaseException) -> None:
        if self.live:
            with contextlib.suppress(InvalidStateError):
                self.future.set_exception(exc)


@dataclass(slots=True, eq=False)
class _Unit:
    """One distinct request and every (job, slot) waiting for its result."""

    request: PoolingRequest
    pooler: TaskPooler
    owner: int  # the submission that queued it first (numbered in arrival order): whose turn it is in
    subscribers: list[tuple[_Job, int]] = field(default_factory=list)
    scheduled: bool = False

    @property
    def live(self) -> bool:
        return any(job.live for job, _ in self.subscribers)


@dataclass(slots=True)
class CoreStats:
    """Counters for benchmarks and metrics (read without a lock: approximate while running)."""

    batches: int = 0
    sequences: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    dropped: int = 0  # requests never run because every caller waiting for them cancelled
    truncated_inputs: int = 0  # inputs cut to the model's length before they were queued


@dataclass(slots=True)
class _Finished:
    units: list[_Unit]
    requests: list[PoolingRequest]
    output: ForwardOutput | None
    error: BaseException | None = None
    event: object | None = None  # CUDA event recorded after the forward pass


CLOSED_MESSAGE = "the engine is closed (Engine.close(), garbage collection or interpreter exit)"


_CORES: weakref.WeakSet[EngineCore] = weakref.WeakSet()  # every live core, for the fork handler


def _after_fork_in_child() -> None:
    for core in list(_CORES):
        core._reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class EngineCore:
    """Owns the runner; batches the queued work of all callers.

    Args:
        runner: the forward pass (called from the worker thread only).
        poolers: task name → pooler.
        batcher: plans batches by token budget.
    """

    def __init__(
        self, runner: ModelRunner, poolers: Mapping[str, TaskPooler], batcher: TokenBudgetBatcher
    ) -> None:
        self.runner = runner
        self.poolers = dict(poolers)
        self.batcher = batcher
        self.stats = CoreStats()
        self._closed = False
        self._forked_from_cuda = False
        self._no_work_yet()
        cuda = runner.device.type == "cuda" and torch.cuda.is_available()
        self._post_stream = torch.cuda.Stream(runner.device) if cuda else None
        _CORES.add(self)

    def _no_work_yet(self) -> None:
        """The lock, queues and threads of a core that has been given no work (started on the first)."""
        self._cv = threading.Condition()
        self._inbox: list[tuple[_Job, Sequence[PoolingRequest]]] = []
        self._queue: deque[_Unit] = deque()  # arrival order; scheduled/dead units are skipped lazily
        self._waiting: dict[PoolingRequest, _Unit] = {}  # not yet scheduled, for deduplication
        self._submissions = 0  # admitted so far: each unit's owner
        self._last_turn = -1  # the owner whose request anchored the last batch
        self._finished: Queue[_Finished | None] = Queue(maxsize=2)
        self._threads: list[threading.Thread] = []
        # (work, its future, when it was queued): run on the worker between batches
        self._chores: deque[tuple[Callable[[], Any], Future[Any], float]] = deque()

    def _reset_after_fork(self) -> None:
        """In a forked child (gunicorn --preload, Celery prefork, a fork-method Pool): the parent's
        threads do not exist here, and the locks and queues they used may be held or hold dead
        waiters, so a first call would wait forever. Fresh ones, no inherited work (its callers live
        in the parent); the threads start again on the first call. CUDA cannot run after a fork."""
        self._no_work_yet()
        self._forked_from_cuda = self.runner.device.type == "cuda"
        self.runner.reset_after_fork()

    # -- callers' side ----------------------------------------------------------------------------
    def submit(
        self, requests: Sequence[PoolingRequest], tally: Tally | None = None
    ) -> Future[list[np.ndarray]]:
        """Queue ``requests``; the future's result is one array per request, in order. ``tally``
        counts them as they are answered (a caller's progress bar)."""
        future: Future[list[np.ndarray]] = Future()
        if not requests:
            future.set_result([])
            return future
        job = _Job(future, len(requests), tally)
        with self._cv:
            if self._closed:
                raise EngineClosedError(CLOSED_MESSAGE)
            if self._forked_from_cuda:
                raise EngineClosedError(
                    "a CUDA engine cannot run in a forked process; create the Engine after the fork "
                    "or start workers with the 'spawn' method"
                )
            self._start_threads()
            # a 1:N score repeats one query's request N times: an input cut once counts once
            distinct = {id(request): request for request in requests}.values()
            self.stats.truncated_inputs += sum(request.truncated for request in distinct)
            self._inbox.append((job, requests))
            self._cv.notify()
        return future

    def run_between_batches(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the worker thread between two batches: at once when nothing is queued,
        else after the next batch once it has waited ``CHORE_PATIENCE_S``. For what must not overlap
        a forward pass (timing another path to the same outputs) or must fall between two
        (switching to that path); a request queued meanwhile waits for one such step at most."""
        future: Future[T] = Future()
        with self._cv:
            if self._closed:
                raise EngineClosedError(CLOSED_MESSAGE)
            self._start_threads()
            self._chores.append((work, future, time.monotonic()))
            self._cv.notify()
        return future

    def replace_runner(self, runner: ModelRunner, poolers: Mapping[str, TaskPooler]) -> Future[None]:
        """Serve with ``runner`` and ``poolers`` (another path to the same outputs) from the next
        batch on; requests queued before keep the pooler they were admitted with."""

        def switch() -> None:
            runner.prepare_for_serving()
            self.runner, self.poolers = runner, dict(poolers)

        return self.run_between_batches(switch)

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop accepting work, fail what is still queued, and stop the threads."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- threads --------------------------------------------------------------------------------
    def _start_threads(self) -> None:
        if self._threads:
            return
        for target, name in ((self._schedule_loop, "poolrag-forward"), (self._post_loop, "poolrag-post")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _schedule_loop(self) -> None:
        try:
            self.runner.prepare_for_serving()
            while True:
                with self._cv:
                    while not self._inbox and not self._has_work() and not self._chores and not self._closed:
                        self._cv.wait()
                    if self._closed:
                        break
                    arrivals, self._inbox = self._inbox, []
                # the loop's own frame names no job, unit or request while it waits: a job holds its
                # request's results, which were kept until the next arrival (a refused token_embed
                # request's 2 GB stayed with an idle server)
                self._admit_all(arrivals)
                del arrivals
                if self._chores and (
                    not self._has_work() or time.monotonic() - self._chores[0][2] >= CHORE_PATIENCE_S
                ):
                    self._run_chore()
                    continue
                self._run_next_batch()
        except BaseException as exc:  # a bug here must not leave callers waiting forever
            logger.exception("engine core scheduler stopped")
            self._fail_everything(exc)
        finally:
            self._fail_everything(EngineClosedError(CLOSED_MESSAGE))
            self._finished.put(None)

    def _admit_all(self, arrivals: list[tuple[_Job, Sequence[PoolingRequest]]]) -> None:
        for index, (job, requests) in enumerate(arrivals):
            try:
                self._admit(job, requests)
            except BaseException:  # the unadmitted are failed with the rest, not lost
                with self._cv:
                    self._inbox[:0] = arrivals[index:]
                raise

    def _run_next_batch(self) -> None:
        units = self._next_batch()
        if units:
            self._run(units)

    def _post_loop(self) -> None:
        while True:
            item = self._finished.get()
            if item is None:
                return
            try:
                self._finish(item)
            except BaseException as exc:
                logger.exception("engine core post-processing failed")
                for unit in item.units:
                    for job, _ in unit.subscribers:
                        job.fail(exc)
            del item  # its output and its jobs' results: not held while the next batch runs

    # -- scheduling -----------------------------------------------------------------------------------
    def _has_work(self) -> bool:
        while self._queue and (self._queue[0].scheduled or not self._queue[0].live):
            self._drop_head()
        return bool(self._queue)

    def _drop_head(self) -> None:
        unit = self._queue.popleft()
        if not unit.scheduled:
            self._waiting.pop(unit.request, None)
            self.stats.dropped += 1

    def _admit(self, job: _Job, requests: Sequence[PoolingRequest]) -> None:
        # one job's requests arrive together, so their queue order is free: longest first puts
        # neighbours in length next to each other, and a window of a few batches then holds
        # sequences of (nearly) equal length however the caller ordered them
        owner = self._submissions
        self._submissions += 1
        for index in sorted(range(len(requests)), key=lambda i: -requests[i].num_tokens):
            request = requests[index]
            unit = self._waiting.get(request)
            if unit is None:
                try:
                    pooler = self.poolers[request.params.task]
                except KeyError:
                    job.fail(KeyError(f"no pooler for task {request.params.task!r}"))
                    return
                unit = _Unit(request, pooler, owner)
                self._waiting[request] = unit
                self._queue.append(unit)
            unit.subscribers.append((job, index))

    def _anchor(self) -> _Unit:
        """The request the next batch is built around: the oldest queued one of the submission after
        the last batch's anchor (in arrival order), else of the oldest submission with work. Units
        sit in the queue in their owners' order, so this is the next caller's turn."""
        if self._queue[-1].owner > self._last_turn:  # a later submission queued work: scan for it
            for unit in self._queue:
                if unit.owner > self._last_turn and not unit.scheduled and unit.live:
                    return unit
        return self._queue[0]  # live and unscheduled (_has_work): one call alone scans nothing

    def _window(self, budget: int) -> list[_Unit]:
        """The anchor first, then live, unscheduled units sharing its pooler and kind of input (text
        or image) in arrival order, up to the window."""
        if not self._has_work():
            return []
        head = self._anchor()
        limit_tokens = budget * WINDOW_BATCHES
        limit_count = self.batcher.max_batch_size * WINDOW_BATCHES
        window: list[_Unit] = [head]
        tokens = head.request.num_tokens
        for unit in self._queue:
            if tokens >= limit_tokens or len(window) >= limit_count:
                break
            if unit.scheduled or unit is head or unit.pooler is not head.pooler:
                continue
            if (unit.request.pixels is None) != (head.request.pixels is None):
                continue  # a batch is all texts or all images: the network takes one or the other
            if not unit.live:
                continue  # dropped when it reaches the head
            window.append(unit)
            tokens += unit.request.num_tokens
        return window

    def _next_batch(self) -> list[_Unit]:
        budget = self.runner.token_budget(self.batcher.max_batch_tokens)
        window = self._window(budget)
        if not window:
            return []
        lengths = [u.request.num_tokens for u in window]
        plan = self.batcher.plan(
            lengths,
            packed=self.runner.padding_free_for(lengths),
            max_batch_tokens=budget,
            attention_hidden_size=self.runner.attention_hidden_size,
        )
        chosen = next(b for b in plan if 0 in b)  # the batch holding the anchor
        self._last_turn = window[0].owner
        units = [window[i] for i in chosen]
        for unit in units:
            unit.scheduled = True
            self._waiting.pop(unit.request, None)
        return units

    # -- running ----------------------------------------------------------------------------------------
    def _run_chore(self) -> None:
        work, future, _ = self._chores.popleft()
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except Exception as exc:  # the caller's to handle, not the engine's
            future.set_exception(exc)

    def _run(self, units: list[_Unit]) -> None:
        requests = [u.request for u in units]
        try:
            inputs = self.runner.prepare(requests)
            output = self.runner.run_prepared(requests, inputs)
            batch_finished()  # the layers' buffers are free now: a CLI process trims its heap
        except Exception as exc:
            if not is_out_of_memory(exc) or len(units) < 2:
                if is_out_of_memory(exc) and not isinstance(exc, OutOfMemoryError):
                    exc = too_big_alone(exc, requests[0].num_tokens)
                logger.warning("forward pass failed for a batch of %d requests: %r", len(requests), exc)
                self._finished.put(_Finished(units, requests, None, exc))
                return
            output = None
        if output is None:
            # the runner's split did not get it through (an input too big even alone, or the halves'
            # results too big to join): each half runs and is answered on its own, so only an input
            # that cannot fit fails, not the other callers batched with it (the failed attempt's
            # tensors, held by its traceback, are gone by now)
            logger.warning("out of memory on a batch of %d requests: running its halves apart", len(units))
            half = len(units) // 2
            self._run(units[:half])
            self._run(units[half:])
            return
        stats = self.stats
        stats.batches += 1
        stats.sequences += len(requests)
        stats.tokens += inputs.num_tokens
        stats.padded_tokens += (
            inputs.num_tokens if inputs.packed else len(requests) * max(r.num_tokens for r in requests)
        )
        event = None
        if self._post_stream is not None:
            event = torch.cuda.Event()
            event.record()
        self._finished.put(_Finished(units, requests, output, None, event))

    def _finish(self, item: _Finished) -> None:
        if item.error is not None:
            for unit in item.units:
                for job, _ in unit.subscribers:
                    job.fail(item.error)
            return
        assert item.output is not None
        pooler = item.units[0].pooler
        if self._post_stream is not None and item.event is not None:
            with torch.cuda.stream(self._post_stream):
                self._post_stream.wait_event(item.event)  # type: ignore[arg-type]
                values = pooler(item.output, item.requests)
        else:
            values = pooler(item.output, item.requests)
        for unit, value in zip(item.units, values, strict=True):
            for n, (job, index) in enumerate(unit.subscribers):
                # callers sharing a result each get their own array: one may modify it in place
                job.deliver(index, value if n == 0 else value.copy())

    def _fail_everything(self, exc: BaseException) -> None:
        with self._cv:
            self._closed = True
            arrivals, self._inbox = self._inbox, []
            chores, self._chores = self._chores, deque()
        for job, _ in arrivals:
            job.fail(exc)
        for _, future, _ in chores:
            if future.set_running_or_notify_cancel():
                future.set_exception(exc)
        for unit in self._queue:
            if not unit.scheduled:
                for job, _ in unit.subscribers:
                    job.fail(exc)
        self._queue.clear()
        self._waiting.clear()
