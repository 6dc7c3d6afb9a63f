"""Build the compiled forward on a background thread and swap it into the runner between batches.

The engine serves at eager speed from its first request. This thread compiles the restated forward
(:mod:`native_graph` for poolrag's BERT-family encoders on packed rows, :mod:`transformers_graph`
for transformers modules on padded rows), loading inductor's artifacts from disk when an earlier
run on this machine saved them, runs the probe texts through both paths, and installs the
compiled one only when every output row has cosine ≥ ``min_cosine`` to eager. Otherwise eager
stays and the report says why.

Recompiles are bounded by dynamic shapes with marks: the packed token count (native) or batch size
and width (transformers) are symbolic from the first compile, so one graph per variant serves
every batch. Once installed, the compiled function runs "run-only" (``torch._dynamo.run``): a
batch that would need a new graph runs the same code eagerly instead of compiling in the
foreground.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import nn

from poolrag.config.network_head import NetworkHead
from poolrag.loading.cpu_fast_mode import FastModeReport
from poolrag.request import PoolingRequest
from poolrag.runner.batch_inputs import BatchInputs
from poolrag.runner.model_runner import ModelRunner

logger = logging.getLogger(__name__)

DEFAULT_MIN_COSINE = 0.99999
CompileState = Literal["compiling", "active", "eager"]


def compile_bar(fast: FastModeReport | None) -> float:
    """The agreement with eager a compiled graph must reach: exactness, or for a model an active
    fast mode converted, what keeps that mode's bar to fp32 (:meth:`FastModeReport.compiled_min_cosine`)."""
    return fast.compiled_min_cosine() if fast is not None and fast.active else DEFAULT_MIN_COSINE


@dataclass(frozen=True, slots=True)
class CompileReport:
    """What the background compile did (``engine.compile_report``).

    Attributes:
        state: ``compiling`` (eager serves meanwhile), ``active`` (compiled serves) or ``eager``
            (compile failed, unsupported or rejected: ``reason`` says which).
        source: ``compiled`` (inductor generated the code now), ``disk cache`` (an earlier run's
            artifacts were loaded from poolrag's cache: no code generation), ``inductor cache``
            (torch's own cache, outside poolrag's, had the code; poolrag's cache gets it now) or
            ``reused`` (this process had already compiled the same graph, e.g. for an earlier
            engine on the same model).
        seconds: from the start of the compile to the swap (or the failure).
        min_cosine: the lowest per-row cosine between compiled and eager outputs on the probe texts.
        max_abs_diff: the largest absolute difference there.
        graph: which forward was compiled; shapes: how recompiles are bounded.
        cache_path: the artifact file read or written; cache_hits: inductor graphs found in the cache.
    """

    state: CompileState
    source: str = ""
    seconds: float = 0.0
    min_cosine: float | None = None
    max_abs_diff: float | None = None
    reason: str = ""
    graph: str = ""
    shapes: str = ""
    cache_path: str = ""
    cache_hits: int = 0


@dataclass(frozen=True, slots=True)
class _Plan:
    graph: str
    shapes: str
    module: nn.Module
    arguments: Callable[[BatchInputs], dict[str, Any]]  # a batch -> the graph's keyword arguments
    variants: tuple[bool, ...]  # first_rows_only values to warm and check
    fullgraph: bool


def _native_arguments(inputs: BatchInputs) -> dict[str, Any]:
    kw = inputs.kwargs
    types = kw.get("token_type_ids")
    return {
        "input_ids": kw["input_ids"][0],  # type: ignore[index]
        "position_ids": kw["position_ids"][0],  # type: ignore[index]
        "cu_seq_lens": kw["cu_seq_lens_q"],
        "token_type_ids": None if types is None else types[0],  # type: ignore[index]
        "first_rows_only": inputs.first_rows_only,
    }


def _padded_arguments(inputs: BatchInputs) -> dict[str, Any]:
    return dict(inputs.kwargs)


def _plan(runner: ModelRunner) -> _Plan | str:
    """What to compile for this runner's model, or why nothing is."""
    if runner.device.type != "cpu":
        return f"compile is built for CPU inference; this model runs on {runner.device.type}"
    if runner.token_states:
        return "token_classify reads hidden states that the compiled classifier does not return"
    if runner.head is NetworkHead.PROJECTED:
        return "a dual encoder's two towers (texts, images) have no compiled graph"
    model = runner.model
    from poolrag.models.bert import BertFamilyModel

    if isinstance(model, BertFamilyModel):
        if not runner.packed:
            return "the native encoder runs padded batches here"
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        if any(type(m) is not nn.Linear for m in linears):
            return "a fast mode replaced the linear layers (compile runs the exact model only)"
        from poolrag.compile.native_graph import NativePackedGraph
        from poolrag.models.int8_linear import SmoothQuantLinear

        first_rows = bool(runner.first_row_tasks)
        int8 = any(isinstance(m, SmoothQuantLinear) for m in model.modules())
        return _Plan(
            "native-packed-int8" if int8 else "native-packed",  # also the disk cache's key
            "dynamic T (packed tokens)",
            NativePackedGraph(model),
            _native_arguments,
            (False, True) if first_rows else (False,),
            fullgraph=True,
        )
    if getattr(model, "native", False):
        return f"no compiled graph for the native {type(model).__name__}"
    if runner.packed:
        return "packed batches of transformers modules are not compiled (CPU runs them padded)"
    if any(not isinstance(p, torch.Tensor) or type(p) is not nn.Parameter for p in model.parameters()):
        return "quantised or offloaded weights"
    from poolrag.compile.transformers_graph import compilable_copy

    return _Plan(
        "transformers-padded",
        "dynamic batch and width",
        compilable_copy(model),
        _padded_arguments,
        (False,),
        fullgraph=False,
    )


def _mark_dynamic(arguments: dict[str, Any]) -> None:
    """Every tensor argument's every dimension is symbolic from the first compile (native: the
    packed rows and the sequence offsets; transformers: batch size and width)."""
    for value in arguments.values():
        if isinstance(value, torch.Tensor):
            for dim in range(value.dim()):
                torch._dynamo.mark_dynamic(value, dim)


def _rows(output: Any) -> torch.Tensor:
    """The output rows to compare: hidden states (or token logits) per token, logits per sequence."""
    value = output.logits if getattr(output, "logits", None) is not None else output.last_hidden_state
    return value.reshape(-1, value.shape[-1]).float()


def compare_rows(eager: torch.Tensor, compiled: torch.Tensor) -> tuple[float, float]:
    """(min per-row cosine, max |Δ|) of two ``[rows, width]`` outputs (width 1: cosine from sign)."""
    if eager.shape != compiled.shape:
        return -1.0, float("inf")
    cosine = torch.nn.functional.cosine_similarity(eager, compiled, dim=1, eps=1e-12)
    return float(cosine.min()), float((eager - compiled).abs().max())


def _source(from_disk: bool, hits: int, misses: int) -> str:
    if misses:
        return "compiled"
    if hits:
        return "disk cache" if from_disk else "inductor cache"
    return "reused"  # this process had compiled the same graph already: no inductor work at all


def _inductor_counter(name: str) -> int:
    from torch._dynamo.utils import counters

    return int(counters["inductor"][name])


_RUNNING: weakref.WeakSet[BackgroundCompile] = weakref.WeakSet()  # for the fork and exit handlers
_EXITING = threading.Event()  # set at interpreter exit: a compile stops after the step it is in
EXIT_WAIT_S = 120.0  # at exit, the longest wait for that step (one graph's code generation)


def _stop_compiling_at_exit() -> None:
    """Stop every compile after its step in flight, and wait for that: a process that ends with the
    compile thread inside torch aborts as it is torn down ("terminate called without an active
    exception", exit 134; a short ``poolrag ingest --compile background``). Code generation in flight
    either ends (its graph is saved, so the next process loads it from disk) or fails as the
    interpreter shuts down; neither is reported."""
    _EXITING.set()
    running = [job for job in list(_RUNNING) if job._thread.is_alive()]
    if running:
        logger.info("stopping the background compile before exiting")
    for job in running:
        job._thread.join(EXIT_WAIT_S)


# Ahead of the executors' own shutdown (registered the same way, earlier, and run in reverse order),
# so the step in flight can still hand inductor's work to them.
getattr(threading, "_register_atexit", atexit.register)(_stop_compiling_at_exit)


def _after_fork_in_child() -> None:
    for job in list(_RUNNING):
        job._abandon_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Exiting(Exception):
    """The interpreter is exiting: nothing more is run or installed."""


def _unless_exiting() -> None:
    if _EXITING.is_set():
        raise _Exiting


class BackgroundCompile:
    """One compile of ``runner``'s model on a daemon thread; ``report`` is safe to read any time.

    Args:
        runner: the engine's runner; its weights must already be in serving form
            (:meth:`ModelRunner.prepare_for_serving`).
        probe: tokenised probe texts, checked through both paths (and the warm-up batch).
        model_identity: the engine's ``facts.model_identity``, part of the disk cache key.
        min_cosine: the per-row bar the compiled outputs must meet to be swapped in.
    """

    def __init__(
        self,
        runner: ModelRunner,
        probe: Sequence[PoolingRequest],
        model_identity: str,
        min_cosine: float = DEFAULT_MIN_COSINE,
    ) -> None:
        self._runner: ModelRunner | None = runner
        self._probe = list(probe)
        self._identity = model_identity
        self._min_cosine = min_cosine
        self._report = CompileReport(state="compiling")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="poolrag-compile", daemon=True)

    def start(self) -> BackgroundCompile:
        _RUNNING.add(self)
        self._thread.start()
        return self

    def _abandon_after_fork(self) -> None:
        """A forked child has no compile thread: an unfinished compile ends here, eager, so that
        ``wait`` returns and the report says why."""
        if not self._done.is_set():
            self._report = replace(self._report, state="eager", reason="the process forked while compiling")
            self._done = threading.Event()
            self._done.set()

    @property
    def report(self) -> CompileReport:
        return self._report

    def wait(self, timeout: float | None = None) -> CompileReport:
        """The report once the compile has ended (or as it stands after ``timeout`` seconds)."""
        self._done.wait(timeout)
        return self._report

    def _main(self) -> None:
        started = time.perf_counter()
        try:
            self._report = self._build(started)
        except Exception as exc:
            if _EXITING.is_set():  # stopped, or failed as the interpreter shut down: nothing logged
                exited = "the process exited while compiling"
                self._report = replace(self._report, state="eager", reason=exited)
                return  # (the finally still ends the job)
            self._report = replace(
                self._report,
                state="eager",
                reason=f"compile failed: {exc!r}"[:500],
                seconds=time.perf_counter() - started,
            )
        finally:
            # let go of the runner (and the model) while an exit still waits for this thread: a
            # dropped engine's model freed with the job, after it left _RUNNING, may be freed as the
            # interpreter finalizes, which aborts the process (exit 134)
            self._runner, self._probe = None, []
            self._done.set()
            _RUNNING.discard(self)
        report = self._report
        if report.state == "active":
            logger.info(
                "compiled forward active (%s, %s) after %.1f s from %s; min cosine to eager %.7f",
                report.graph,
                report.shapes,
                report.seconds,
                report.source,
                report.min_cosine,
            )
        else:
            logger.warning("compiled forward not used, eager stays: %s", report.reason)

    def _build(self, started: float) -> CompileReport:
        from poolrag.compile.disk_cache import CompileKey, load_artifacts, save_artifacts

        runner = self._runner
        assert runner is not None  # set until the job ends
        plan = _plan(runner)
        if isinstance(plan, str):
            return CompileReport(state="eager", reason=plan)
        dtype = next(runner.model.parameters()).dtype
        key = CompileKey.for_model(self._identity, plan.graph, dtype, runner.device, plan.shapes)
        self._report = CompileReport(
            state="compiling", graph=plan.graph, shapes=plan.shapes, cache_path=str(key.path())
        )
        _unless_exiting()
        from_disk = load_artifacts(key)
        hits, misses = _inductor_counter("fxgraph_cache_hit"), _inductor_counter("fxgraph_cache_miss")
        compiled = torch.compile(plan.module, dynamic=False, fullgraph=plan.fullgraph)
        worst_cosine, worst_diff = 1.0, 0.0
        for first_rows in plan.variants:
            _unless_exiting()
            inputs = runner.prepare(self._probe)
            inputs.first_rows_only = first_rows and inputs.packed
            inputs = inputs.to(runner.device)
            arguments = plan.arguments(inputs)
            _mark_dynamic(arguments)
            with torch.inference_mode():
                got = _rows(compiled(**arguments))
                if _EXITING.is_set():  # the code generated is kept for the next process
                    if _inductor_counter("fxgraph_cache_miss") > misses:
                        save_artifacts(key)
                    raise _Exiting
                extra = {"first_rows_only": True} if inputs.first_rows_only else {}
                want = _rows(runner.model(**inputs.kwargs, **extra))
            cosine, diff = compare_rows(want, got)
            worst_cosine, worst_diff = min(worst_cosine, cosine), max(worst_diff, diff)
        _unless_exiting()
        hits = _inductor_counter("fxgraph_cache_hit") - hits
        misses = _inductor_counter("fxgraph_cache_miss") - misses
        report = replace(
            self._report,
            source=_source(from_disk, hits, misses),
            min_cosine=worst_cosine,
            max_abs_diff=worst_diff,
            cache_hits=hits,
        )
        if misses or (not from_disk and hits):  # poolrag's cache keeps what torch's had too
            save_artifacts(key)
        if worst_cosine < self._min_cosine:
            return replace(
                report,
                state="eager",
                seconds=time.perf_counter() - started,
                reason=f"compiled outputs differ from eager: min cosine {worst_cosine:.7f}"
                f" < {self._min_cosine}",
            )
        run_only = torch._dynamo.run(compiled)
        native = plan.arguments is _native_arguments

        def forward(inputs: BatchInputs) -> Any:
            if inputs.packed != native:
                return None  # a layout this graph was not built for: eager runs it
            return run_only(**plan.arguments(inputs))

        runner.install_compiled(forward)
        return replace(report, state="active", seconds=time.perf_counter() - started)
