"""The race between a model's candidate paths, run on this machine: which agree, and which is fastest.

Each candidate's outputs on the probe texts are compared with the reference path's (transformers'
own modules, eager) and those below ``MIN_COSINE`` per row are rejected; the rest are timed on one
batch of the model's own tokenised texts, sized to about ``TARGET_PASS_S`` a pass, in interleaved
passes within ``TIMING_BUDGET_S``, and the first (default) candidate keeps its place unless another
is ``WIN_MARGIN`` faster pass for pass: a noisy neighbour slows the candidates of one pass alike.
Which candidates a load has, and what becomes of the winner (the verdict, the serving path), is
:mod:`poolrag.core.autotune`'s; this module only measures and compares.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import torch

from poolrag.core.model_setup import Pipeline
from poolrag.core.tune_verdicts import CandidateTiming
from poolrag.loading.cpu_fast_mode import FastModeReport, probe_requests
from poolrag.request import PoolingRequest, ResolvedParams

if TYPE_CHECKING:  # the compiler stack loads only when a compiled candidate is measured
    from poolrag.compile.background import BackgroundCompile

logger = logging.getLogger(__name__)

MIN_COSINE = 0.99999  # per-row cosine to the reference path an exact candidate must reach
CALIBRATION_TOKENS = 256  # the smallest timing batch, timed first to size the real one
TARGET_PASS_S = 0.25  # one candidate's pass should take about this long
TIMING_BUDGET_S = 6.0  # seconds of timed passes to aim for, over all candidates
MIN_PASSES, MAX_PASSES = 1, 9  # a machine too busy for more than one pass in the budget gets one
#: how much faster than the default (the race's first candidate: the load's own exact path, or
#: exact fp32 against the fast modes) another must be, pass for pass, to replace it: on a busy
#: machine a burst of load can flatter the slower path, and a verdict lasts (a review picked the
#: 1.7x slower path in 2 of 9 loaded tunings by medians alone)
WIN_MARGIN = 0.10

T = TypeVar("T")
#: where a step that runs a model or times one is run: here, or between a serving engine's batches
RunStep = Callable[[Callable[[], T]], T]


def run_here(step: Callable[[], T]) -> T:
    """A step of a measurement made before the engine serves: run at once, on this thread."""
    return step()


@dataclass(slots=True)
class Candidate:
    """One path in a race: its pipeline, and what the race found (status, cosine, times per pass)."""

    impl: str
    forward: str
    precision: str
    pipeline: Pipeline
    compile_job: BackgroundCompile | None = None
    fast_report: FastModeReport | None = None
    status: str = "slower"
    min_cosine: float | None = None
    batch: list[PoolingRequest] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    def timing(self) -> CandidateTiming:
        return CandidateTiming(
            self.impl, self.forward, self.precision, self.status, self.seconds, self.min_cosine
        )


def pipeline_impl(pipeline: Pipeline) -> str:
    """Which implementation built ``pipeline``: candidates, kept weights and verdicts are named by it."""
    return "native" if getattr(pipeline.executor.runner.model, "native", False) else "transformers"


def _probe_rows(pipeline: Pipeline, run: RunStep) -> torch.Tensor:
    """Every output row of the probe texts: token states (or token logits), else sequence logits."""
    probe = probe_requests(pipeline.processor)
    out = run(lambda: pipeline.executor.runner.forward(probe))
    rows = out.tokens.states if out.tokens is not None else out.sequences
    assert rows is not None
    return rows.reshape(-1, rows.shape[-1]).float()


def agreement(reference: torch.Tensor, candidate: torch.Tensor) -> float:
    """Lowest per-row cosine of two ``[rows, width]`` outputs; one-wide outputs (a score per text)
    are compared as one vector of scores, since a single value's cosine is only its sign."""
    if reference.shape != candidate.shape:
        return -1.0
    if reference.shape[-1] == 1:
        reference, candidate = reference.reshape(1, -1), candidate.reshape(1, -1)
    cosine = torch.nn.functional.cosine_similarity(reference, candidate, dim=1, eps=1e-12)
    return float(cosine.min())


def timing_batch(pipeline: Pipeline, tokens: int) -> list[PoolingRequest]:
    """The probe texts, tokenised for the model's first task, repeated to about ``tokens`` tokens."""
    params = ResolvedParams(task=pipeline.supported_tasks[0])
    from poolrag.loading.cpu_fast_mode import PROBE_TEXTS

    one_round = pipeline.processor.texts(list(PROBE_TEXTS), params, -1, None)
    per_round = max(sum(r.num_tokens for r in one_round), 1)
    rounds = max(1, tokens // per_round)
    return [r for _ in range(rounds) for r in one_round]


def _run_once(candidate: Candidate, run: RunStep) -> float:
    runner = candidate.pipeline.executor.runner

    def timed() -> float:  # timed where it runs: waiting for a turn is not the candidate's time
        started = time.perf_counter()
        runner.forward(candidate.batch)
        return time.perf_counter() - started

    return run(timed)


def time_interleaved(candidates: Sequence[Candidate], run: RunStep) -> int:
    """A warm-up pass each, then passes over all candidates in a rotating order; returns how many
    passes were taken (as many as fit ``TIMING_BUDGET_S``, within ``MIN_PASSES``..``MAX_PASSES``)."""
    warm = sum(_run_once(c, run) for c in candidates)
    passes = int(min(MAX_PASSES, max(MIN_PASSES, TIMING_BUDGET_S // max(warm, 1e-3))))
    for index in range(passes):
        shift = index % len(candidates)
        for candidate in (*candidates[shift:], *candidates[:shift]):
            candidate.times.append(_run_once(candidate, run))
    return passes


def compile_candidate(candidate: Candidate, identity: str) -> None:
    """Compile ``candidate``'s runner now (a compiled path is timed compiled); ``failed`` if it cannot."""
    from poolrag.compile.background import BackgroundCompile, compile_bar

    runner = candidate.pipeline.executor.runner
    probe = probe_requests(candidate.pipeline.processor)
    job = BackgroundCompile(runner, probe, identity, compile_bar(candidate.fast_report)).start()
    report = job.wait()
    candidate.compile_job = job
    if report.state != "active":
        candidate.status = "failed"
        logger.info("autotune: %s compiled not a candidate: %s", candidate.impl, report.reason)


def reject_disagreeing(candidates: list[Candidate], run: RunStep) -> None:
    """Mark ``rejected`` each candidate whose outputs on the probe texts fall below
    ``MIN_COSINE`` per row to the reference path's (transformers' eager modules, else the first)."""
    reference = next((c for c in candidates if c.impl == "transformers" and c.forward == "eager"), None)
    want = _probe_rows((reference or candidates[0]).pipeline, run)
    for candidate in candidates:
        if candidate.status == "failed":
            continue
        candidate.pipeline.executor.runner.prepare_for_serving()
        candidate.min_cosine = agreement(want, _probe_rows(candidate.pipeline, run))
        if candidate.min_cosine < MIN_COSINE:
            candidate.status = "rejected"
            logger.warning(
                "autotune: %s %s differs from the reference path (min cosine %.7f < %s); not used",
                candidate.impl,
                candidate.forward,
                candidate.min_cosine,
                MIN_COSINE,
            )


def _batch_tokens(candidate: Candidate, run: RunStep, most_tokens: int, floor: int) -> int:
    """A timing batch whose pass takes about ``TARGET_PASS_S`` on this machine as loaded now
    (a bigger model or a busier machine gets a smaller batch, so tuning stays bounded)."""
    candidate.pipeline.executor.runner.prepare_for_serving()
    candidate.batch = timing_batch(candidate.pipeline, CALIBRATION_TOKENS)
    _run_once(candidate, run)  # the first pass creates oneDNN's primitives
    seconds = _run_once(candidate, run)
    tokens = sum(r.num_tokens for r in candidate.batch) * TARGET_PASS_S / max(seconds, 1e-4)
    return int(min(most_tokens, max(floor, tokens)))


def race(
    candidates: list[Candidate], run: RunStep, most_tokens: int, floor: int = CALIBRATION_TOKENS
) -> tuple[Candidate, int]:
    """(the winner, passes) of ``candidates`` (those not ``rejected`` or ``failed``) timed in
    interleaved passes; the winner is marked ``chosen``, and no other."""
    open_ = [c for c in candidates if c.status not in ("rejected", "failed")]
    passes = 0
    if len(open_) > 1:
        tokens = _batch_tokens(open_[0], run, most_tokens, floor)
        for candidate in open_:
            candidate.pipeline.executor.runner.prepare_for_serving()
            candidate.batch = timing_batch(candidate.pipeline, tokens)
        passes = time_interleaved(open_, run)
    if not open_:  # nothing agreed with the reference: the first path, as without tuning
        open_ = candidates[:1]
    winner = chosen(open_)
    for candidate in candidates:
        if candidate.status == "chosen":
            candidate.status = "slower"
    winner.status = "chosen"
    return winner, passes


def paired_ratio(candidate: Candidate, default: Candidate) -> float:
    """The median, over the passes both ran, of ``candidate``'s time over ``default``'s in the same
    pass: interleaved passes share the machine's load of the moment, so their ratio sheds it."""
    return statistics.median(c / d for c, d in zip(candidate.times, default.times, strict=False) if d > 0)


def chosen(open_: Sequence[Candidate]) -> Candidate:
    """The first (default) candidate, unless another ran ``WIN_MARGIN`` faster pass for pass; then
    the fastest of those."""
    default, challengers = open_[0], [c for c in open_[1:] if c.times and open_[0].times]
    ratios = {id(c): paired_ratio(c, default) for c in challengers}
    faster = [c for c in challengers if ratios[id(c)] * (1 + WIN_MARGIN) <= 1]
    return min(faster, key=lambda c: ratios[id(c)]) if faster else default
