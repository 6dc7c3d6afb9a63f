"""How a loaded model runs on this machine, as one value: what the tuner chose or the caller pinned.

The CPU speed stack (poolrag's native encoder or transformers' modules, packed attention's
runs-or-groups bound, the bf16 / int8 fast modes, an inductor-compiled forward) is decided in
:mod:`.autotune` and switched on here, in one place, so the engine and the background tuner apply
a decision the same way and nothing else reaches into the runner for speed.
"""

from __future__ import annotations

from dataclasses import dataclass

from poolrag.core.model_setup import Pipeline
from poolrag.loading.cpu_fast_mode import FastModeReport, enable_cpu_fast_mode, probe_requests
from poolrag.loading.native_loader import ModelImpl
from poolrag.models.packed_attention import RunsOrGroups, use_runs_or_groups


@dataclass(frozen=True, slots=True)
class SpeedPlan:
    """Attributes:
    impl: the implementation the pipeline was built with (``auto`` where nothing was chosen).
    fast_mode: ``bf16`` / ``int8`` to switch on (None: exact fp32).
    compile: compile the forward in the background (the chosen path is a compiled one).
    min_rows_per_run: a native encoder's attention bound on this CPU (None: its default).
    """

    impl: ModelImpl = "auto"
    fast_mode: str | None = None
    compile: bool = False
    min_rows_per_run: int | None = None


def install_attention_bound(pipeline: Pipeline, min_rows_per_run: int | None) -> None:
    """Packed CPU attention's runs-or-groups bound for this model's shape (a process-wide table)."""
    model = pipeline.executor.runner.model
    if min_rows_per_run is None or not getattr(model, "native", False):
        return
    heads, head_dim = model.attention_shape
    use_runs_or_groups(heads, head_dim, RunsOrGroups(min_rows_per_run))


def apply_plan(
    pipeline: Pipeline,
    plan: SpeedPlan,
    fast_min_cosine: float | None,
    fast_report: FastModeReport | None,
) -> FastModeReport | None:
    """Switch ``plan`` on for ``pipeline``; the fast mode's report (``fast_report`` when measuring
    already switched it on). The compile, which runs beside serving, the engine starts itself."""
    install_attention_bound(pipeline, plan.min_rows_per_run)
    if plan.fast_mode is None or fast_report is not None:
        return fast_report
    probe = probe_requests(pipeline.processor)
    return enable_cpu_fast_mode(pipeline.executor.runner, plan.fast_mode, probe, fast_min_cosine)
