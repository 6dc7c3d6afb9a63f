"""The autotune report (``engine.tune_report``) as Prometheus gauges, read at scrape time.

An operator comparing machines wants to see which exact path a server runs and why, without
reading its log: the chosen path and tuning state as an info-style gauge (value 1, the facts in
labels), what tuning cost, and each candidate's median seconds per timing batch and its lowest
cosine to the reference. Labels take only the tuner's own small vocabularies (impl, forward,
precision, status, state) and the served model's name, so the number of series is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_CANDIDATE_LABELS = ("impl", "forward", "precision", "status")


class TuneReportCollector(Collector):
    """Reads each served engine's tune report on each scrape, labelled by the model's name; an engine
    without one (not :class:`~poolrag.Engine`, e.g. a test double, has no tuner) adds nothing."""

    def __init__(self, engines: Sequence[tuple[str, Any]]) -> None:
        self.engines = tuple(engines)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(
            "poolrag_autotune_info",
            "The path autotuning chose for the served model (value 1; state measured/cached/off/skipped).",
            labels=("model", "state", "impl", "forward", "fast_mode"),
        )
        seconds = GaugeMetricFamily(
            "poolrag_autotune_seconds",
            "Wall-clock seconds tuning cost at this load (0 when the cached verdict was taken).",
            labels=("model",),
        )
        batch = GaugeMetricFamily(
            "poolrag_autotune_batch_tokens", "Tokens in the timing batch.", labels=("model",)
        )
        rows_per_run = GaugeMetricFamily(
            "poolrag_autotune_attention_min_rows_per_run",
            "Fewest rows an equal-length run must average for CPU attention to call SDPA per run.",
            labels=("model",),
        )
        timing = GaugeMetricFamily(
            "poolrag_autotune_candidate_seconds",
            "Median seconds per timing batch of each timed candidate.",
            labels=("model", *_CANDIDATE_LABELS),
        )
        cosine = GaugeMetricFamily(
            "poolrag_autotune_candidate_min_cosine",
            "Each candidate's lowest per-row cosine to the reference path's outputs.",
            labels=("model", *_CANDIDATE_LABELS),
        )
        for name, engine in self.engines:
            report = getattr(engine, "tune_report", None)
            if report is None:
                continue
            verdict = report.verdict
            seconds.add_metric((name,), report.seconds)
            if verdict is None:
                info.add_metric((name, report.state, "", "", ""), 1)
                continue
            info.add_metric((name, report.state, verdict.impl, verdict.forward, verdict.fast_mode or ""), 1)
            batch.add_metric((name,), verdict.batch_tokens)
            if verdict.min_rows_per_run is not None:
                rows_per_run.add_metric((name,), verdict.min_rows_per_run)
            for candidate in verdict.candidates:
                labels = (name, candidate.impl, candidate.forward, candidate.precision, candidate.status)
                if candidate.seconds is not None:
                    timing.add_metric(labels, candidate.seconds)
                if candidate.min_cosine is not None:
                    cosine.add_metric(labels, candidate.min_cosine)
        yield from (info, seconds, batch, rows_per_run, timing, cosine)
