"""Time a model's exact paths behind a serving engine and switch to the fastest between batches.

Timing a model's candidate paths before its first load returns costs seconds (13.6 s for
all-MiniLM-L6-v2 on a busy two-core machine, where sentence-transformers loads the folder in
0.2 s). Where only exact paths are in question (:func:`poolrag.core.autotune.load_tuned` decides),
the engine serves at once on the default path and this thread measures behind it:

* it starts once the engine has been idle for ``SETTLE_S`` (a script's first calls run alone), or
  after ``START_PATIENCE_S`` of continuous work;
* every forward pass of the measurement runs on the engine's own worker thread between batches
  (:meth:`~poolrag.core.engine_core.EngineCore.run_between_batches`), so a timing never overlaps
  a request's batch and a request waits for one timing step at most; loading the other candidate
  is the only work that runs beside requests;
* the verdict is saved as a foreground measurement's is, and when another candidate won (its
  outputs matched the reference, as every candidate's must), its runner replaces the serving one
  between two batches;
* one process measures a model at a time (:mod:`poolrag.core.measuring_turn`): the others that
  load it meanwhile (``serve --workers N``) keep serving and take its verdict once it is saved.

The other candidate is a second model load: transformers' modules and poolrag's native encoder
hold their weights in different layouts, so the weights already loaded are not shared.
A process that ends before the verdict is in saves none; the next load measures again
(``poolrag tune MODEL`` measures ahead of time).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from poolrag.core.autotune import TuneReport, progress
from poolrag.core.candidate_race import RunStep
from poolrag.core.engine_core import EngineCore
from poolrag.core.model_setup import Pipeline
from poolrag.errors import EngineClosedError
from poolrag.native_heap import batch_finished

logger = logging.getLogger(__name__)

T = TypeVar("T")

SETTLE_S = 0.5  # how long the engine must have run no batch before measuring starts
START_PATIENCE_S = 10.0  # an engine busy for this long gets measured anyway, between its batches

EXIT_WAIT_S = 60.0  # at exit, the longest wait for a measurement's step in flight to end

_RUNNING: weakref.WeakSet[BackgroundTune] = weakref.WeakSet()  # for the fork handler and the exit
_EXITING = threading.Event()  # set at interpreter exit: a measurement stops where it is, silently


def _stop_measuring_at_exit() -> None:
    """Stop every measurement after the step it is in (a model build, a timed batch: seconds at
    most). A process that ended with a thread still inside torch's kernels aborted as its thread
    pools were torn down ("terminate called without an active exception", exit 134): a command as
    short as ``poolrag search`` on a first load did, one time in three."""
    _EXITING.set()
    for job in list(_RUNNING):
        job._thread.join(EXIT_WAIT_S)


atexit.register(_stop_measuring_at_exit)


def _after_fork_in_child() -> None:
    for job in list(_RUNNING):
        job._abandon("the process forked while measuring")


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Exiting(Exception):
    """The interpreter is exiting: nothing more is measured, saved or logged."""


class BackgroundTune:
    """One model's measurement on a daemon thread; ``report`` is safe to read any time.

    Args:
        measure: times the paths, given where each step runs (``autotune.measure_exact`` bound to
            this load); returns the report and the winner's pipeline.
        serving: the default path's pipeline, whose engine core serves meanwhile.
        report: the report until the verdict is in (``measuring``).
    """

    def __init__(
        self,
        measure: Callable[[RunStep], tuple[TuneReport, Pipeline]],
        serving: Pipeline,
        report: TuneReport,
    ) -> None:
        self._measure: Callable[[RunStep], tuple[TuneReport, Pipeline]] | None = measure
        self._serving: Pipeline | None = serving
        self._report = report
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="poolrag-tune", daemon=True)

    def start(self) -> BackgroundTune:
        progress.info(
            "no speed verdict for this model on this machine yet: measuring its fastest exact path in the "
            "background; serving on the default path meanwhile (a process that ends first saves no "
            "verdict: `poolrag tune MODEL` measures once, ahead of time)"
        )
        _RUNNING.add(self)
        self._thread.start()
        return self

    @property
    def report(self) -> TuneReport:
        return self._report

    def wait(self, timeout: float | None = None) -> TuneReport:
        """The report once the measurement has ended (or as it stands after ``timeout`` seconds)."""
        self._done.wait(timeout)
        return self._report

    def _abandon(self, reason: str) -> None:
        """A forked child has no measuring thread: its engine keeps the default path."""
        if not self._done.is_set():
            self._report = replace(self._report, state="skipped", reason=reason)
            self._done = threading.Event()
            self._done.set()

    def _main(self) -> None:
        try:
            self._report = self._measure_and_switch()
        except _Exiting:
            return
        except EngineClosedError:
            self._report = replace(
                self._report, state="skipped", reason="the engine was closed before the measurement ended"
            )
        except Exception as exc:
            if _EXITING.is_set():  # the interpreter is shutting down under the step (its executors
                return  # refuse new work): nothing was measured, nothing to say
            logger.warning("measuring this model's paths failed; the default path stays: %r", exc)
            self._report = replace(self._report, state="skipped", reason=f"measuring failed: {exc!r}"[:500])
        finally:
            self._measure = self._serving = None  # the engine is not kept alive by a finished job
            batch_finished()  # the losing candidate's load is free now: a CLI process trims its heap
            self._done.set()
            _RUNNING.discard(self)

    def _measure_and_switch(self) -> TuneReport:
        """The measurement and the switch, in a frame of their own: the core and the winner it holds
        are let go as it ends, before the job leaves ``_RUNNING``. Held by ``_main``'s frame, a
        dropped engine's model was freed after that, while an exit no longer waited for the thread:
        freeing its tensors as the interpreter finalized aborted the process ("terminate called
        without an active exception", exit 134; a script closing first loads in a loop, 1 run in 8)."""
        assert self._serving is not None and self._measure is not None
        core = self._serving.executor.core
        self._settle(core)
        report, winner = self._measure(lambda step: self._step(core, step))
        return self._switch(core, report, winner)

    @staticmethod
    def _step(core: EngineCore, step: Callable[[], T]) -> T:
        if _EXITING.is_set():
            raise _Exiting
        return core.run_between_batches(step).result()

    def _settle(self, core: EngineCore) -> None:
        """Return once the engine has run no batch for ``SETTLE_S`` and has none queued, or once
        ``START_PATIENCE_S`` have passed."""
        deadline = time.monotonic() + START_PATIENCE_S
        while True:
            before = core.stats.batches
            if _EXITING.wait(SETTLE_S):
                raise _Exiting
            if self._step(core, lambda: core.stats.batches) == before or time.monotonic() >= deadline:
                return

    def _switch(self, core: EngineCore, report: TuneReport, winner: Pipeline) -> TuneReport:
        """Serve on ``winner`` from the next batch on, unless it is the default path already."""
        assert self._serving is not None and report.verdict is not None
        logger.debug("autotune measured in the background:\n%s", report.table())
        if winner is self._serving:
            return _said(report, "the default path (%s eager) is the fastest exact path here (%s)")
        runner = winner.executor.runner
        if runner.accepts_token_types != core.runner.accepts_token_types:
            # requests are tokenised by the default path's processor: this engine keeps that path
            winner.executor.close()
            return _said(report, "%s eager is faster here (%s); later loads serve on it")
        core.replace_runner(runner, winner.executor.poolers).result()
        winner.executor.close()  # its own core never ran: the runner now serves in the engine's
        return _said(report, "%s eager is the fastest exact path here (%s); serving on it now")


def _said(report: TuneReport, outcome: str) -> TuneReport:
    """``report``, once its outcome is said: ``outcome`` names the winner's path (``%s``) and then
    where the verdict went (``%s``), after how long the measuring took and by which process."""
    assert report.verdict is not None
    where = f"saved to {report.path}" if report.path else "not saved"
    by = "another process measured" if report.state == "cached" else "measured"
    progress.info(f"{by} in %.1f s: {outcome}", report.verdict.seconds, report.verdict.impl, where)
    return report
