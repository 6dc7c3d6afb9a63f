"""Where one SDPA call per equal-length run starts to beat padded groups, measured on this machine.

A CPU batch of many distinct lengths can go through attention as one SDPA call per run of equal
lengths (no copies, but a fixed cost per call and layer) or copied into a few padded groups (one
call each, but every row copied in and out). Which wins depends on how many rows a run averages,
and the break-even point moves with the CPU, its thread count and the attention's shape (one Xeon,
2 threads: 23-26 rows for 12 heads of 32, 13-14 for 12 of 64, 7-10 for 16 of 64; with 1 thread: 12
for 12 × 32, 4 for 16 × 64), so it is timed for the model's attention shape (in fp32, whatever fast
mode serves) at tuning and cached with the tune verdict. Both splits of a few batches of 16
short sequences are timed in interleaved passes; a straight line through log(groups / runs)
against log(rows per run) gives the crossing, so one noisy probe moves it little. It takes well
under a second.
"""

from __future__ import annotations

import logging
import math
import statistics
import time

import torch

from poolrag.models.packed_attention import AttentionLayout, RunsOrGroups, packed_self_attention

logger = logging.getLogger(__name__)

PROBE_SEQUENCES = 16  # distinct consecutive lengths per probe batch: 16 runs of one sequence each
SHORTEST = (1, 4, 8, 16, 24, 32, 48, 64)  # each probe batch's shortest sequence: 8.5-71.5 rows a run
PASSES = 7
# the crossing is clamped to this range: the probes span 8.5-71.5 rows a run, the line is trusted
# a little beyond them
LOWEST, HIGHEST = 4, 256

_RUNS = RunsOrGroups(max_runs_always=1 << 30)
_GROUPS = RunsOrGroups(min_rows_per_run=1 << 30, max_runs_always=0)


def measure_runs_or_groups(heads: int, head_dim: int) -> RunsOrGroups:
    """The choice for attention with ``heads`` heads of ``head_dim`` in fp32 on this CPU, now."""
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(0)
    points = []
    for shortest in SHORTEST:
        lengths = torch.arange(shortest + PROBE_SEQUENCES - 1, shortest - 1, -1)  # sorted, as batched
        qkv = torch.randn(int(lengths.sum()), 3 * heads * head_dim, generator=generator)
        layout = AttentionLayout.from_lengths(lengths)
        runs, groups = _time_both(qkv, layout, heads)
        points.append((int(lengths.sum()) / PROBE_SEQUENCES, groups / runs))
    rows = crossing(points)
    choice = RunsOrGroups() if rows is None else RunsOrGroups(min_rows_per_run=rows)
    logger.info(
        "attention on this CPU (%d heads of %d): one SDPA call per run from %d rows a run%s (%.2f s)",
        heads,
        head_dim,
        choice.min_rows_per_run,
        " (no trend in the timings: the default)" if rows is None else "",
        time.perf_counter() - started,
    )
    return choice


def crossing(points: list[tuple[float, float]]) -> int | None:
    """Rows per run where ``groups / runs`` crosses 1 on the least-squares line through the
    ``(rows per run, groups / runs)`` points in log-log; None when the ratio does not rise with
    rows per run, or too few points are usable (the timings said nothing: the default stays)."""
    usable = [(r, q) for r, q in points if r > 0 and 0 < q < math.inf]
    if len({r for r, _ in usable}) < 2:
        return None
    slope, intercept = statistics.linear_regression(
        [math.log(r) for r, _ in usable], [math.log(q) for _, q in usable]
    )
    if not slope > 0:
        return None
    log_rows = min(max(-intercept / slope, math.log(LOWEST)), math.log(HIGHEST))  # no overflow
    return round(math.exp(log_rows))


def _time_both(qkv: torch.Tensor, layout: AttentionLayout, heads: int) -> tuple[float, float]:
    """Median seconds of attention by runs and by groups, after a warm-up of each."""
    choices = (_RUNS, _GROUPS)
    times: tuple[list[float], list[float]] = ([], [])
    for choice in choices:
        packed_self_attention(qkv, layout, heads, choice)
    for _ in range(PASSES):
        for choice, taken in zip(choices, times, strict=True):
            started = time.perf_counter()
            packed_self_attention(qkv, layout, heads, choice)
            taken.append(time.perf_counter() - started)
    return max(statistics.median(times[0]), 1e-9), statistics.median(times[1])
