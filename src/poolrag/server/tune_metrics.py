"""The autotune report (``engine.tune_report``) as Prometheus gauges, read at scrape time.

An operator comparing machines wants to see which exact path a server runs and why, without
reading its log: the chosen path and tuning state as an info-style gauge (value 1, the facts in
labels), what tuning cost, and each candidate's median seconds per timing batch and its lowest
cosine to the reference. Labels take only the tuner's own small vocabularies (impl, forward,
precision, status, state), so the number of series is bounded whatever the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_CANDIDATE_LABELS = ("impl", "forward", "precision", "status")


class TuneReportCollector(Collector):
    """Reads the engine's tune report on each scrape; yields nothing for an engine without one
    (an engine that is not :class:`~poolrag.Engine`, e.g. a test double, has no tuner)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily]:
        report = getattr(self.engine, "tune_report", None)
        if report is None:
            return
        verdict = report.verdict
        info = GaugeMetricFamily(
            "poolrag_autotune_info",
            "The path autotuning chose for the served model (value 1; state measured/cached/off/skipped).",
            labels=("state", "impl", "forward", "fast_mode"),
        )
        if verdict is None:
            info.add_metric((report.state, "", "", ""), 1)
        else:
            info.add_metric((report.state, verdict.impl, verdict.forward, verdict.fast_mode or ""), 1)
        yield info
        yield GaugeMetricFamily(
            "poolrag_autotune_seconds",
            "Wall-clock seconds tuning cost at this load (0 when the cached verdict was taken).",
            value=report.seconds,
        )
        if verdict is None:
            return
        yield GaugeMetricFamily(
            "poolrag_autotune_batch_tokens", "Tokens in the timing batch.", value=verdict.batch_tokens
        )
        timing = GaugeMetricFamily(
            "poolrag_autotune_candidate_seconds",
            "Median seconds per timing batch of each timed candidate.",
            labels=_CANDIDATE_LABELS,
        )
        cosine = GaugeMetricFamily(
            "poolrag_autotune_candidate_min_cosine",
            "Each candidate's lowest per-row cosine to the reference path's outputs.",
            labels=_CANDIDATE_LABELS,
        )
        for candidate in verdict.candidates:
            labels = (candidate.impl, candidate.forward, candidate.precision, candidate.status)
            if candidate.seconds is not None:
                timing.add_metric(labels, candidate.seconds)
            if candidate.min_cosine is not None:
                cosine.add_metric(labels, candidate.min_cosine)
        yield timing
        yield cosine
