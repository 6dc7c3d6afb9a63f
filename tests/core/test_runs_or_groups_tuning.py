"""Where CPU attention switches from padded groups to one SDPA call per equal-length run is measured
on the machine: the crossing is read off a line through the timings, so one noisy probe moves it
little, and a measurement that shows no trend keeps the default. No assertion reads a timing: the
bound differs by CPU, threads and attention shape; what holds everywhere is its range."""

from __future__ import annotations

import pytest

from poolrag.core.runs_or_groups_tuning import HIGHEST, LOWEST, crossing, measure_runs_or_groups
from poolrag.models.packed_attention import RunsOrGroups


def _line(tie: float, slope: float, rows: list[float]) -> list[tuple[float, float]]:
    """``groups / runs`` = (rows / tie) ** slope at each rows per run."""
    return [(r, (r / tie) ** slope) for r in rows]


ROWS = [8.5, 11.5, 15.5, 23.5, 31.5, 39.5, 55.5, 71.5]


@pytest.mark.parametrize("tie", [10.0, 24.0, 60.0])
def test_the_bound_is_where_groups_stop_being_faster(tie: float) -> None:
    assert crossing(_line(tie, 0.4, ROWS)) == round(tie)


def test_one_noisy_probe_moves_the_bound_little() -> None:
    points = _line(24.0, 0.4, ROWS)
    points[4] = (points[4][0], points[4][1] * 0.8)  # one probe 20% off, the wrong side of 1
    assert abs(crossing(points) - 24) <= 3


def test_the_bound_stays_within_its_range() -> None:
    assert crossing(_line(1.0, 0.4, ROWS)) == LOWEST  # runs win everywhere
    assert crossing(_line(5000.0, 0.4, ROWS)) == HIGHEST  # groups win everywhere
    nearly_flat = [(r, 0.6 * r**0.0005) for r in ROWS]  # the line meets 1 at e**1000 rows a run
    assert crossing(nearly_flat) == HIGHEST


def test_probes_without_a_usable_ratio_are_left_out() -> None:
    points = [*_line(24.0, 0.4, ROWS), (12.0, 0.0), (40.0, float("inf")), (30.0, float("nan"))]
    assert crossing(points) == 24
    assert crossing([(10.0, 0.0), (20.0, 1.2)]) is None  # one usable point draws no line


@pytest.mark.parametrize("slope", [0.0, -0.3])
def test_timings_that_do_not_rise_with_rows_per_run_say_nothing(slope: float) -> None:
    assert crossing(_line(24.0, slope, ROWS)) is None


@pytest.mark.parametrize(("heads", "head_dim"), [(12, 32), (2, 16)])
def test_a_measurement_on_this_cpu_is_a_bound_in_range(heads: int, head_dim: int) -> None:
    choice = measure_runs_or_groups(heads, head_dim)
    assert isinstance(choice, RunsOrGroups) and choice.max_runs_always == RunsOrGroups().max_runs_always
    assert LOWEST <= choice.min_rows_per_run <= HIGHEST
