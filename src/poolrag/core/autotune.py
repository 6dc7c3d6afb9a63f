"""Choose the fastest exact path for a model on this machine by timing it, and remember the choice.

Which path is fastest depends on the CPU (transformers modules compiled were 1.5x poolrag's
native encoder on a Sapphire Rapids Xeon, the native encoder won on a Zen 5 EPYC), so
the choice is measured where the model runs instead of fixed by a rule. At a model's first load
the candidates that exist for it are built and raced (:mod:`poolrag.core.candidate_race`: those
that disagree with the reference path are dropped, the rest timed in interleaved passes, and
another path replaces the default only when it is ``WIN_MARGIN`` faster pass for pass: a verdict lasts).
The verdict is written by :mod:`poolrag.core.tune_verdicts`; later loads read it and build only
the chosen path. Either way the outcome is a :class:`~poolrag.core.speed_plan.SpeedPlan` (the
implementation, attention bound, fast mode and compile) that the engine switches on in one place.
Each implementation is read from the checkpoint once; its other candidates (fast modes, compiled
forwards) copy the weights already in memory.

* ``tune="auto"`` (the default) times the eager candidates: a second model load and a race whose
  timing batch and passes are sized to this machine as loaded now, so the cost stays bounded.
  Where only exact paths are in question (no ``cpu_fast_mode``, no pinned ``compile``), the engine
  serves on the default path at once and :mod:`poolrag.core.background_tune` measures behind it,
  switching to the winner between batches; otherwise the load measures before it returns.
  Compiling costs 35-45 s per candidate on two cores (minutes on a busy one), so compiled candidates
  are timed only by ``tune="full"`` (``poolrag tune MODEL``); a verdict that chose a compiled
  path makes later engines compile it in the background, from the artifacts the tuning saved.
* ``cpu_fast_mode="auto"`` times bf16 and int8 against the chosen exact path the same way; a mode
  is a candidate only where its cosine to fp32 meets the fast-mode bar, and exact fp32 stays unless
  one is ``WIN_MARGIN`` faster. ``tune="full"`` adds int8 compiled on native encoders (its quantisation
  fused), held to what keeps the fast-mode bar to fp32.
* A native encoder on the CPU also gets its attention's runs-or-groups bound measured for its
  shape (:mod:`poolrag.core.runs_or_groups_tuning`, well under a second), kept in the verdict and
  installed for the process at every load.
* ``tune="cached"`` uses a verdict on disk and measures nothing (``poolrag search``, whose process
  ends before a measurement could, and whose query it would slow).
* ``tune="off"`` (or ``POOLRAG_TUNE=off``) loads exactly as before tuning existed.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeGuard

import torch

from poolrag.config.option_choices import TUNE_ENV, TUNE_MODES, TuneMode
from poolrag.core.candidate_race import (
    Candidate,
    RunStep,
    compile_candidate,
    pipeline_impl,
    race,
    reject_disagreeing,
    run_here,
)
from poolrag.core.measuring_turn import POLL_S, measuring_turn
from poolrag.core.model_setup import Pipeline, with_network
from poolrag.core.runs_or_groups_tuning import measure_runs_or_groups
from poolrag.core.speed_plan import SpeedPlan, install_attention_bound
from poolrag.core.tune_verdicts import CandidateTiming, TuneKey, Verdict, read_verdict, write_verdict
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.loading.cpu_fast_mode import FAST_MODES, FastModeReport, enable_cpu_fast_mode, probe_requests
from poolrag.loading.native_loader import ModelImpl
from poolrag.model_facts import model_identity

if TYPE_CHECKING:  # the compiler stack loads only when a compiled candidate is measured
    from poolrag.compile.background import BackgroundCompile
    from poolrag.core.background_tune import BackgroundTune

logger = logging.getLogger(__name__)
#: the lines a user should see at a first load whatever the log level (the commands show it at
#: INFO without --verbose): that the paths are being timed, and what was chosen
PROGRESS_LOGGER = f"{__name__}.progress"
progress = logging.getLogger(PROGRESS_LOGGER)

TIMING_TOKENS = 2048  # most tokens in the timing batch (and at most the engine's batch budget)
# fast modes are raced on batches of at least this many tokens: on tiny batches the casts and
# per-token scales weigh more than in serving (a 244-token race picked fp32 where bf16 served
# 1.77x faster, RESULTS.md), and the caller asked for the measurement, so it may cost more
FAST_MIN_TOKENS = 1024


def resolve_tune_mode(value: str | None) -> TuneMode:
    """``value``, else ``$POOLRAG_TUNE``, else ``auto``; anything else is refused in one line."""
    mode = value if value is not None else os.environ.get(TUNE_ENV) or "auto"
    if mode not in TUNE_MODES:
        source = "tune" if value is not None else f"${TUNE_ENV}"
        raise InvalidInputError(f"{source} must be one of {', '.join(TUNE_MODES)}, not {mode!r}")
    return mode  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class TuneReport:
    """What tuning did at this load (``engine.tune_report``).

    Attributes:
        state: ``measured`` (timed now and saved), ``cached`` (an earlier verdict taken as is),
            ``measuring`` (timed in the background while the default path serves; ``measured`` once
            the verdict is in), ``off`` (``tune="off"``) or ``skipped`` (nothing to choose between,
            or the measurement was abandoned: ``reason`` says why).
        verdict: the choice and every candidate's timing (None when off, or skipped before
            anything was measured).
        seconds: what tuning cost this load (0 when cached, unless an older verdict's missing
            attention bound was measured now).
        path: the verdict file.
    """

    state: Literal["measured", "cached", "measuring", "off", "skipped"]
    reason: str = ""
    verdict: Verdict | None = None
    seconds: float = 0.0
    path: str = ""

    def table(self) -> str:
        """The candidates as a text table, fastest accepted first, and the verdict."""
        if self.verdict is None:
            return f"autotune {self.state}: {self.reason}"
        verdict = self.verdict
        exact = next(
            (c.seconds for c in verdict.candidates if c.status == "chosen" and c.precision == "fp32"), None
        )
        lines = [f"{'candidate':<30} {'status':<9} {'ms/batch':>9} {'x exact':>8} {'min cosine':>11}"]
        for c in verdict.candidates:
            # fast modes ran their own passes against the exact path: their ratio is to that timing
            base = exact if c.precision == "fp32" else verdict.fast_reference_seconds
            ms = "-" if c.seconds is None else f"{c.seconds * 1e3:.1f}"
            ratio = "-" if c.seconds is None or not base else f"{base / c.seconds:.3f}"
            cosine = "-" if c.min_cosine is None else f"{c.min_cosine:.7f}"
            lines.append(f"{c.name:<30} {c.status:<9} {ms:>9} {ratio:>8} {cosine:>11}")
        if verdict.fast_reference_seconds is not None:
            lines.append(
                f"(fast modes timed in their own passes, the chosen exact path "
                f"{verdict.fast_reference_seconds * 1e3:.1f} ms/batch there)"
            )
        fast = f", fast mode {verdict.fast_mode}" if verdict.fast_mode else ""
        lines.append(
            f"verdict: {verdict.impl} {verdict.forward}{fast} ({self.state}; {verdict.batch_tokens}-token "
            f"batch, {verdict.passes} interleaved passes; measuring took {verdict.seconds:.1f} s)"
        )
        if verdict.min_rows_per_run is not None:
            lines.append(
                f"attention on this CPU: one SDPA call per equal-length run from "
                f"{verdict.min_rows_per_run} rows a run, padded groups below"
            )
        if not verdict.compiled_measured:
            lines.append(
                "compiled candidates not measured (tune='full', or `poolrag tune MODEL` without --no-compile)"
            )
        return "\n".join(lines)


@dataclass(slots=True)
class TuneRequest:
    """What the caller pinned and what is left to measure.

    Attributes:
        mode: ``auto``, ``full``, ``cached`` or ``off``.
        model_name: the engine's model name (part of the compiled graphs' cache key).
        model_impl, compile: as passed to the engine; a pinned value is not a choice.
        fast_mode: the engine's ``cpu_fast_mode`` (``"auto"`` measures bf16 and int8).
        fast_min_cosine: the fast modes' accuracy bar (None: the engine's default).
        settings: the load options that change the candidates' shapes (part of the verdict's key).
    """

    mode: TuneMode
    model_name: str
    model_impl: ModelImpl = "auto"
    compile: str | None = None
    fast_mode: str | None = None
    fast_min_cosine: float | None = None
    settings: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class TunedLoad:
    """The pipeline to serve with, the plan the engine switches on for it (``speed_plan.apply_plan``),
    and what measuring already did.

    Attributes:
        compile_job: the finished compile of the chosen runner (measured now, already installed).
        fast_report: the fast mode measuring already switched on (None: ``plan``'s is still to do).
        background: the measurement to start once the engine is built (``pipeline`` is the default
            path, serving meanwhile).
    """

    pipeline: Pipeline
    report: TuneReport
    plan: SpeedPlan
    compile_job: BackgroundCompile | None = None
    fast_report: FastModeReport | None = None
    background: BackgroundTune | None = None


class _Tuner:
    """One load's measuring: makes candidates and keeps the winner's pipeline; every forward pass
    it makes goes through ``run``.

    An implementation is loaded from the checkpoint once (``build``); a second candidate of it (a
    fast mode, a compiled forward) is a copy of the weights already in memory, taken before any
    candidate packed or converted them, so it starts from the same exact model a fresh load gives.
    """

    def __init__(
        self,
        build: Callable[[ModelImpl], Pipeline],
        identity: str,
        batch_tokens: int,
        run: RunStep = run_here,
    ) -> None:
        self._build = build
        self._identity = identity
        self._tokens = batch_tokens
        self._run = run
        self._loaded: dict[str, tuple[Pipeline, torch.nn.Module]] = {}

    def keep(self, pipeline: Pipeline) -> Pipeline:
        """Remember ``pipeline``'s weights (not yet packed or converted) for later candidates of its
        implementation."""
        if pipeline_impl(pipeline) not in self._loaded:
            self._loaded[pipeline_impl(pipeline)] = (pipeline, copy.deepcopy(pipeline.executor.runner.model))
        return pipeline

    def pipeline(self, impl: ModelImpl) -> Pipeline:
        """A candidate's pipeline: a copy of ``impl``'s weights in memory, else a load."""
        kept = self._loaded.get(impl)
        if kept is None:
            return self.keep(self._build(impl))
        template, weights = kept
        return with_network(template, copy.deepcopy(weights))

    def forget(self) -> None:
        """Drop the kept weights: measuring is over."""
        self._loaded.clear()

    def exact(self, request: TuneRequest, first: Pipeline) -> _Measured:
        """The race of the exact paths the request leaves open; ``first``: the default path, already
        built."""
        candidates = self._exact_candidates(request, first)
        if len(candidates) > 1:
            reject_disagreeing(candidates, self._run)
        winner, passes = race(candidates, self._run, self._tokens)
        # only the winner's implementation gets later candidates: the other copy is dropped now
        self._loaded = {impl: kept for impl, kept in self._loaded.items() if impl == winner.impl}
        return _Measured(winner, winner, candidates, tuple(c.timing() for c in candidates), passes)

    def _exact_candidates(self, request: TuneRequest, first: Pipeline) -> list[Candidate]:
        """``first``; transformers' modules beside poolrag's native encoder where ``model_impl`` is
        left open; a compiled forward of each under ``tune="full"`` with compile not pinned."""
        # later candidates of one impl, or the weights a pinned fast mode converts once timing is over
        copies = request.mode == "full" or request.fast_mode is not None
        if copies:
            self.keep(first)
        candidates = [Candidate(pipeline_impl(first), "eager", "fp32", first)]
        if request.model_impl == "auto" and candidates[0].impl == "native":
            other = self._build("transformers")
            other = self.keep(other) if copies else other
            candidates.append(Candidate("transformers", "eager", "fp32", other))
        if request.mode == "full" and request.compile is None:
            for impl in [c.impl for c in candidates]:
                pipeline = self.pipeline(impl)  # type: ignore[arg-type]
                pipeline.executor.runner.prepare_for_serving()
                compiled = Candidate(impl, "compiled", "fp32", pipeline)
                compile_candidate(compiled, self._identity)
                candidates.append(compiled)
        return candidates

    def fast(self, exact: Candidate, request: TuneRequest) -> tuple[Candidate, list[Candidate], int]:
        """(the winner, the fast candidates, passes): bf16 and int8 against ``exact``, each held to
        the fast-mode cosine bar first."""
        candidates = [exact]
        for mode in FAST_MODES:
            candidate = self._fast_candidate(exact, mode, "eager", request)
            candidates.append(candidate)
            if mode == "int8" and candidate.status != "rejected" and _compiles_fast_modes(request, exact):
                candidates.append(self._compiled_int8(exact, request))
        exact.times.clear()  # timed again, interleaved with the fast modes
        winner, passes = race(candidates, self._run, self._tokens, floor=FAST_MIN_TOKENS)
        return winner, candidates[1:], passes

    def _fast_candidate(self, exact: Candidate, mode: str, forward: str, request: TuneRequest) -> Candidate:
        """A fresh copy of ``exact``'s weights switched to fast ``mode``, ``rejected`` where its
        outputs miss the fast-mode cosine bar."""
        pipeline = self.pipeline(exact.impl)  # type: ignore[arg-type]
        probe = probe_requests(pipeline.processor)
        report = enable_cpu_fast_mode(pipeline.executor.runner, mode, probe, request.fast_min_cosine)
        status = "slower" if report.active else "rejected"
        return Candidate(exact.impl, forward, mode, pipeline, None, report, status, report.min_cosine)

    def _compiled_int8(self, exact: Candidate, request: TuneRequest) -> Candidate:
        """int8 compiled: its per-token quantisation fused by inductor (a fresh int8 model, since
        a compiled runner serves only through its graph)."""
        candidate = self._fast_candidate(exact, "int8", "compiled", request)
        if candidate.status == "rejected":  # the same measurement as the eager candidate's: should not happen
            return candidate
        candidate.pipeline.executor.runner.prepare_for_serving()
        compile_candidate(candidate, self._identity)
        return candidate


def _compiles_fast_modes(request: TuneRequest, exact: Candidate) -> bool:
    """Compiled fast candidates are timed where compiled exact ones are (``tune="full"``, compile
    not pinned) and exist for int8 on poolrag's native encoders only."""
    return request.mode == "full" and request.compile is None and exact.impl == "native"


def _close_others(keep: Pipeline, candidates: Sequence[Candidate]) -> None:
    for candidate in candidates:
        if candidate.pipeline is not keep:
            candidate.pipeline.executor.close()


def _untuned(
    build: Callable[[ModelImpl], Pipeline],
    request: TuneRequest,
    state: Literal["off", "skipped"],
    reason: str,
) -> TunedLoad:
    if request.fast_mode == "auto":
        raise InvalidInputError(
            f"cpu_fast_mode='auto' chooses by measurement, which is not done here: {reason}"
        )
    plan = SpeedPlan(request.model_impl, request.fast_mode)
    return TunedLoad(build(request.model_impl), TuneReport(state, reason), plan)


def not_tunable(device: torch.device, places_itself: bool) -> str | None:
    """Why this load has no candidates to time, or None."""
    if device.type != "cpu":
        return f"tuning times CPU paths; on {device.type} the default path runs"
    if places_itself:
        return "device_map / quantization place the weights through transformers"
    return None


def _say_before_blocking(message: str) -> None:
    """A load that measures before it returns (a fast mode, ``tune="full"``, a pinned compile: each
    asked for) blocks for seconds to a minute: said at INFO where progress is shown (the CLI, an
    app's logging), else at WARNING, which Python prints unconfigured, so a script is not left
    waiting in silence. The default load measures in the background and says nothing there."""
    shown = progress.isEnabledFor(logging.INFO) and progress.hasHandlers()
    progress.log(logging.INFO if shown else logging.WARNING, "%s", message)


def load_tuned(
    build: Callable[[ModelImpl], Pipeline],
    model_fingerprint: str,
    device: torch.device,
    request: TuneRequest,
    batch_tokens: int,
    places_itself: bool,
) -> TunedLoad:
    """The pipeline to serve with, chosen as :mod:`poolrag.core.autotune` describes.

    Args:
        build: loads the model with one ``model_impl`` (the engine's other options bound).
        model_fingerprint: the weights' fingerprint (``core.model_setup.fingerprints``): it keys the
            verdict and the compiled graphs.
        device: where the model runs.
        request: what the caller pinned.
        batch_tokens: the engine's token budget (the timing batch is at most this big).
        places_itself: device_map / quantization are set.
    """
    if request.mode == "off":
        return _untuned(build, request, "off", "tune='off'")
    reason = not_tunable(device, places_itself)
    if reason is not None:
        return _untuned(build, request, "skipped", reason)
    key = TuneKey.for_load(model_fingerprint, request.settings, device)
    saved = _saved_choice(build, request, key)
    if _serves(saved, request):
        return _from_verdict(saved, request, key)
    if request.mode == "cached":  # a short process: measuring would be paid for and thrown away
        return _untuned(
            build, request, "skipped", "no usable verdict for it on this machine (`poolrag tune MODEL`)"
        )
    started = time.perf_counter()
    identity = model_identity(request.model_name, model_fingerprint)
    first = None if saved is not None else build(request.model_impl)
    if first is not None and _measures_behind_serving(request, first):
        measure = functools.partial(measure_exact, first, build, request, key, identity, batch_tokens)
        return _serve_while_measuring(first, measure, key)
    with measuring_turn(key, lambda: time.sleep(POLL_S), _say_before_blocking) as waited:
        if waited:  # another process measured this model meanwhile: start again from its verdict
            for built in (None if saved is None else saved.pipeline, first):
                if built is not None:
                    built.executor.close()
            saved, started = _saved_choice(build, request, key), time.perf_counter()
            if _serves(saved, request):
                return _from_verdict(saved, request, key)
            first = None if saved is not None else build(request.model_impl)
        return _measured_before_serving(build, request, key, identity, batch_tokens, saved, first, started)


def _serves(saved: _Saved | None, request: TuneRequest) -> TypeGuard[_Saved]:
    """Whether the verdict on disk answers this load (a fast mode left to measure needs its race)."""
    return saved is not None and (request.fast_mode != "auto" or saved.verdict.fast_mode is not None)


def _measured_before_serving(
    build: Callable[[ModelImpl], Pipeline],
    request: TuneRequest,
    key: TuneKey,
    identity: str,
    batch_tokens: int,
    saved: _Saved | None,
    first: Pipeline | None,
    started: float,
) -> TunedLoad:
    """Measure what the verdict on disk (``saved``) leaves open, else every path (``first``, the
    default, already built), save the verdict and serve its choice."""
    tuner = _Tuner(build, identity, min(batch_tokens, TIMING_TOKENS))
    if saved is not None:  # exact path known: time only the fast modes
        exact = _exact_of_verdict(tuner, saved)
    else:
        assert first is not None
        exact = _exact_timed(tuner, request, first)
    measured = _with_precision(tuner, request, exact)
    verdict = _verdict_of(measured, request, batch_tokens, started)
    return _report_measured(measured, verdict, request, key)


class _Saved(NamedTuple):
    """A saved verdict this load may take, and its path built."""

    verdict: Verdict
    pipeline: Pipeline


def _saved_choice(
    build: Callable[[ModelImpl], Pipeline], request: TuneRequest, key: TuneKey
) -> _Saved | None:
    """The verdict on disk with its path built; None where measuring decides: ``tune="full"``
    (which measures anew), no usable file, a path the caller pinned away or one this model cannot load."""
    if request.mode not in ("auto", "cached"):
        return None
    cached = _allowed(read_verdict(key), request, key)
    pipeline = None if cached is None else _built(build, cached, key)
    return None if cached is None or pipeline is None else _Saved(cached, pipeline)


def _from_verdict(saved: _Saved, request: TuneRequest, key: TuneKey) -> TunedLoad:
    """Serve the saved verdict's path as it chose; only the attention bound a file from before it
    was measured lacks is measured now (and written back)."""
    cached, pipeline = saved
    started = time.perf_counter()
    rows = _runs_or_groups(pipeline, cached.min_rows_per_run)
    reason, seconds = "verdict read from disk", 0.0
    if rows != cached.min_rows_per_run:  # a file from before the bound was measured
        cached = replace(cached, min_rows_per_run=rows)
        write_verdict(key, cached)
        reason, seconds = f"{reason}; attention's bound measured now", time.perf_counter() - started
    fast = _fast_choice(request, cached.fast_mode)
    report = TuneReport("cached", reason, cached, seconds, str(key.path()))
    logger.info("autotune: %s %s (cached verdict %s)", cached.impl, cached.forward, key.path())
    forward = cached.forward if fast is None else cached.fast_forward
    # a pinned fast mode other than the measured one was not timed compiled
    fast_compiled = fast is None or fast == cached.fast_mode
    compile = forward == "compiled" and request.compile is None and fast_compiled
    return TunedLoad(pipeline, report, SpeedPlan(cached.impl, fast, compile, rows))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class _Measured:
    """What a measurement before serving timed.

    Attributes:
        exact: the exact path (the race's winner, or the saved verdict's).
        chosen: what serves: ``exact``, or a fast mode of it.
        exact_candidates: the exact paths timed now (none where the verdict named ``exact``).
        exact_rows: the exact paths' timings for the verdict, taken before the fast modes' race
            times ``exact`` again.
        exact_passes: the exact paths' race's passes (the verdict's where it named ``exact``).
        fast_candidates, fast_passes: the fast modes timed against ``exact``, and their race's passes.
        saved: the verdict that named ``exact`` (None: raced now).
    """

    exact: Candidate
    chosen: Candidate
    exact_candidates: list[Candidate]
    exact_rows: tuple[CandidateTiming, ...]
    exact_passes: int
    fast_candidates: list[Candidate] = field(default_factory=list)
    fast_passes: int = 0
    saved: Verdict | None = None


def _exact_of_verdict(tuner: _Tuner, saved: _Saved) -> _Measured:
    """The saved verdict's exact path as the fast modes' baseline, its exact timings kept."""
    cached, pipeline = saved
    exact = Candidate(cached.impl, cached.forward, "fp32", tuner.keep(pipeline))
    exact.pipeline.executor.runner.prepare_for_serving()
    rows = tuple(c for c in cached.candidates if c.precision == "fp32")
    _say_before_blocking("timing the fast modes of this model on this machine before serving")
    return _Measured(exact, exact, [], rows, cached.passes, saved=cached)


def _exact_timed(tuner: _Tuner, request: TuneRequest, first: Pipeline) -> _Measured:
    """The exact paths the request leaves open raced, ``first`` (the default, already built) among them."""
    if pipeline_impl(first) == "native" or request.fast_mode == "auto" or request.mode == "full":
        _say_before_blocking(
            "no speed verdict for this model on this machine yet: timing its paths before serving "
            "(later loads read the verdict)"
        )
    return tuner.exact(request, first)


def _with_precision(tuner: _Tuner, request: TuneRequest, measured: _Measured) -> _Measured:
    """``measured`` with the precision that serves: the fast mode that won against the exact path
    (``cpu_fast_mode="auto"``), a fresh copy of the exact weights for a pinned fast mode to convert,
    else the exact path itself. Measuring is over: the kept weights are dropped."""
    exact = measured.exact
    if request.fast_mode == "auto":
        chosen, fast_candidates, passes = tuner.fast(exact, request)
        measured = replace(measured, chosen=chosen, fast_candidates=fast_candidates, fast_passes=passes)
    elif request.fast_mode is not None:  # pinned: the plan converts weights that timing left unpacked
        fresh = replace(exact, forward="eager", pipeline=tuner.pipeline(exact.impl), compile_job=None)  # type: ignore[arg-type]
        measured = replace(measured, chosen=fresh)
    tuner.forget()
    return measured


def _verdict_of(
    measured: _Measured, request: TuneRequest, batch_tokens: int, started: float, run: RunStep = run_here
) -> Verdict:
    """The verdict of ``measured``, with the attention bound for the path that serves (the saved
    verdict's, else measured now) and what measuring cost since ``started``."""
    wants_fast = request.fast_mode == "auto"
    exact, chosen, saved = measured.exact, measured.chosen, measured.saved
    rows = _runs_or_groups(chosen.pipeline, None if saved is None else saved.min_rows_per_run, run)
    return Verdict(
        impl=exact.impl,
        forward=exact.forward,
        fast_mode=(chosen.precision if wants_fast else None),
        compiled_measured=(request.mode == "full" and request.compile is None)
        or (saved is not None and saved.compiled_measured),
        candidates=(*measured.exact_rows, *(c.timing() for c in measured.fast_candidates)),
        batch_tokens=sum(r.num_tokens for r in chosen.batch) or min(batch_tokens, TIMING_TOKENS),
        passes=max(measured.fast_passes, measured.exact_passes),
        seconds=round(time.perf_counter() - started, 3),
        fast_reference_seconds=exact.seconds if wants_fast else None,
        fast_forward=chosen.forward if wants_fast and chosen is not exact else "eager",
        min_rows_per_run=rows,
    )


def _report_measured(measured: _Measured, verdict: Verdict, request: TuneRequest, key: TuneKey) -> TunedLoad:
    """Save ``verdict``, say what it chose, close the candidates that lost, and serve the winner."""
    exact, chosen = measured.exact, measured.chosen
    if (
        len(measured.exact_candidates) == 1
        and request.fast_mode != "auto"
        and verdict.min_rows_per_run is None
    ):
        # one exact path and nothing else asked: nothing was chosen, nothing worth remembering
        report = TuneReport("skipped", "one exact path for this model: nothing to choose", verdict)
        return TunedLoad(exact.pipeline, report, SpeedPlan(exact.impl, request.fast_mode))  # type: ignore[arg-type]
    path = write_verdict(key, verdict)
    report = TuneReport("measured", "timed now", verdict, verdict.seconds, str(path or ""))
    logger.info("autotune measured in %.1f s:\n%s", verdict.seconds, report.table())
    progress.info(
        "measured in %.1f s: %s %s %s serves (%s)",
        verdict.seconds,
        chosen.impl,
        chosen.forward,
        chosen.precision,
        f"saved to {path}" if path else "not saved",
    )
    _close_others(chosen.pipeline, [*measured.exact_candidates, *measured.fast_candidates, exact])
    compiled = chosen.forward == "compiled" and request.compile is None
    fast = _fast_choice(request, verdict.fast_mode)
    plan = SpeedPlan(exact.impl, fast, compiled and chosen.compile_job is None, verdict.min_rows_per_run)  # type: ignore[arg-type]
    return TunedLoad(
        chosen.pipeline,
        report,
        plan,
        compile_job=chosen.compile_job if compiled else None,
        fast_report=chosen.fast_report,
    )


def _allowed(cached: Verdict | None, request: TuneRequest, key: TuneKey) -> Verdict | None:
    """A verdict the caller's pins allow: a file naming another ``model_impl`` than the one pinned
    (edited, or written by another poolrag) is ignored, with one warning."""
    if cached is not None and request.model_impl not in ("auto", cached.impl):
        logger.warning(
            "ignoring tune verdict %s: it names model_impl=%r, this load pins %r; tuning again",
            key.path(),
            cached.impl,
            request.model_impl,
        )
        return None
    return cached


def _built(build: Callable[[ModelImpl], Pipeline], cached: Verdict, key: TuneKey) -> Pipeline | None:
    """The verdict's path loaded, or None (and one warning naming the file) when this model cannot
    load it, so the load measures again instead of failing on a choice the caller never made."""
    try:
        return build(cached.impl)  # type: ignore[arg-type]
    except ModelLoadError as exc:
        logger.warning("ignoring tune verdict %s: %s; tuning again", key.path(), exc)
        return None


def _runs_or_groups(pipeline: Pipeline, known: int | None, run: RunStep = run_here) -> int | None:
    """The runs-or-groups bound for a native encoder's attention shape (``known`` from the verdict,
    else measured now); None for models without packed CPU attention. The plan installs it."""
    model = pipeline.executor.runner.model
    if not getattr(model, "native", False):
        return None
    if known is not None:
        return known
    heads, head_dim = model.attention_shape
    return run(lambda: measure_runs_or_groups(heads, head_dim)).min_rows_per_run


def _measures_behind_serving(request: TuneRequest, first: Pipeline) -> bool:
    """Whether the default path can serve while the exact paths are timed: only exact paths are in
    question (no fast mode to switch on, no compile pinned to a runner) and there is more than one
    (``first`` is poolrag's native encoder: transformers' modules are the other candidate, and its
    attention bound is measured)."""
    return (
        request.mode == "auto"
        and request.fast_mode is None
        and request.compile != "background"
        and pipeline_impl(first) == "native"
    )


def _serve_while_measuring(
    first: Pipeline, measure: Callable[[RunStep], tuple[TuneReport, Pipeline]], key: TuneKey
) -> TunedLoad:
    from poolrag.core.background_tune import BackgroundTune

    report = TuneReport(
        "measuring", "serving on the default path while the exact paths are timed", path=str(key.path())
    )
    plan = SpeedPlan(pipeline_impl(first))  # type: ignore[arg-type]
    return TunedLoad(first, report, plan, background=BackgroundTune(measure, first, report))


def measure_exact(
    first: Pipeline,
    build: Callable[[ModelImpl], Pipeline],
    request: TuneRequest,
    key: TuneKey,
    identity: str,
    batch_tokens: int,
    run: RunStep = run_here,
) -> tuple[TuneReport, Pipeline]:
    """Time the exact paths, ``first`` (the default one, already built) among them, and save the
    verdict; (the report, the winner's pipeline). Every other candidate is closed; ``first`` is
    left to its owner. Where another process measures this model meanwhile, its verdict is taken
    once it is saved (:mod:`poolrag.core.measuring_turn`)."""

    def idle() -> None:  # a step between batches: the engine's closing or the exit ends the wait
        time.sleep(POLL_S)
        run(lambda: None)

    with measuring_turn(key, idle, progress.info) as waited:
        adopted = _verdict_measured_elsewhere(first, build, request, key, run) if waited else None
        if adopted is not None:
            return adopted
        started = time.perf_counter()
        tuner = _Tuner(build, identity, min(batch_tokens, TIMING_TOKENS), run)
        measured = tuner.exact(request, first)
        exact, candidates = measured.exact, measured.exact_candidates
        verdict = _verdict_of(measured, request, batch_tokens, started, run)
        run(lambda: install_attention_bound(exact.pipeline, verdict.min_rows_per_run))
        path = write_verdict(key, verdict)
        _close_others(exact.pipeline, [c for c in candidates if c.pipeline is not first])
        report = TuneReport(
            "measured", "timed while the default path served", verdict, verdict.seconds, str(path or "")
        )
        return report, exact.pipeline


def _verdict_measured_elsewhere(
    first: Pipeline,
    build: Callable[[ModelImpl], Pipeline],
    request: TuneRequest,
    key: TuneKey,
    run: RunStep,
) -> tuple[TuneReport, Pipeline] | None:
    """The verdict another process saved while this one waited, with its path (``first`` where
    that is the default path); None where there is none to take, and this process measures."""
    cached = _allowed(read_verdict(key), request, key)
    if cached is None:
        return None
    pipeline = first if cached.impl == pipeline_impl(first) else _built(build, cached, key)
    if pipeline is None:
        return None
    rows = _runs_or_groups(pipeline, cached.min_rows_per_run, run)
    run(lambda: install_attention_bound(pipeline, rows))
    reason = "verdict measured by another process while this one served"
    return TuneReport("cached", reason, cached, 0.0, str(key.path())), pipeline


def _fast_choice(request: TuneRequest, measured: str | None) -> str | None:
    """The fast mode the engine switches on: the caller's, or the measured one (fp32: none)."""
    if request.fast_mode != "auto":
        return request.fast_mode
    return None if measured in (None, "fp32") else measured
