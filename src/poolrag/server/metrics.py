"""Prometheus metrics: one registry per app, so several servers can live in one process.

Under ``poolrag serve --workers N`` (:mod:`poolrag.server.workers`) prometheus_client runs in its
multiprocess mode: every worker writes its values to files in one directory and a scrape, whichever
worker answers it, adds them all up. The engine cores' counters, read from each engine at scrape
time in one process, are then copied into counters at the end of each request, so the other
workers' batches are in the sum too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.server.scope_path import route_path
from poolrag.server.tune_metrics import TuneReportCollector

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

#: up to 10 minutes: a request of 2048 long inputs (the default cap) runs for minutes on a CPU
_LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
UNMATCHED_PATH = "unmatched"
#: The status recorded for requests whose client left before the answer (nginx's convention).
CLIENT_CLOSED = 499


#: The engine core's counters: (field of its stats, metric name, help).
_CORE_COUNTERS = (
    ("batches", "poolrag_engine_batches", "Forward passes run by the engine core."),
    ("sequences", "poolrag_engine_sequences", "Inputs run through forward passes, all requests together."),
    ("tokens", "poolrag_engine_tokens", "Real tokens run through forward passes."),
    ("padded_tokens", "poolrag_engine_padded_tokens", "Tokens in forward passes including padding."),
    (
        "truncated_inputs",
        "poolrag_engine_truncated_inputs",
        "Inputs cut to the model's length before they ran (turned off by --no-auto-truncate).",
    ),
)


class EngineCoreCollector(Collector):
    """Each engine core's own counters, read at scrape time and labelled by model: forward passes,
    the sequences and tokens in them (sequences / batches is the mean batch size the core formed
    across requests)."""

    def __init__(self, engines: Sequence[tuple[str, InProcessEngine]]) -> None:
        self.engines = tuple(engines)

    def collect(self) -> Iterator[CounterMetricFamily]:
        families = {
            field: CounterMetricFamily(name, description, labels=["model"])
            for field, name, description in _CORE_COUNTERS
        }
        for name, engine in self.engines:
            stats = engine.core_stats
            for field, family in families.items():
                family.add_metric([name], getattr(stats, field))
        yield from families.values()


def multiprocess_mode() -> bool:
    """prometheus_client keeps its values in files shared by several processes (``--workers``)."""
    return "PROMETHEUS_MULTIPROC_DIR" in os.environ


class EngineCoreCounters:
    """The engine cores' counters as multiprocess counters: each worker adds what its cores did
    since it last looked (at the end of each request and before a scrape). Each model's series is
    there from the first scrape, at zero, as one process's are, even a counter nothing has added to
    yet (the truncated inputs, most often)."""

    def __init__(self, engines: Sequence[tuple[str, InProcessEngine]], registry: CollectorRegistry) -> None:
        self.engines = tuple(engines)
        self.counters = {
            field: Counter(name, description, ["model"], registry=registry)
            for field, name, description in _CORE_COUNTERS
        }
        for name, _ in self.engines:
            for counter in self.counters.values():
                counter.labels(name)
        self._seen = {(name, field): 0 for name, _ in self.engines for field in self.counters}

    def sync(self) -> None:
        for name, engine in self.engines:
            stats = engine.core_stats
            for field, counter in self.counters.items():
                value = getattr(stats, field)
                if value != self._seen[name, field]:
                    counter.labels(name).inc(value - self._seen[name, field])
                    self._seen[name, field] = value


class ServerMetrics:
    """Requests, tokens, queue depth, request and engine batch sizes, latencies.

    What the HTTP layer sees before a body names its model (requests, their latency, body bytes in
    flight) is counted per process; what happens on a model's engine and admission budget carries
    a ``model`` label (the model's first served name).
    """

    def __init__(self, engines: Sequence[tuple[str, InProcessEngine]] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # the process's memory, CPU and open files, and Python's collections, as vLLM's default
        # registry shows them: what an operator alerts on from the server's own scrape
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.tune = TuneReportCollector(engines)
        self.core_counters: EngineCoreCounters | None = None
        if multiprocess_mode():
            self.core_counters = EngineCoreCounters(engines, self.registry)
        elif engines:
            self.registry.register(EngineCoreCollector(engines))
            self.registry.register(self.tune)
        self.requests = Counter(
            "poolrag_requests",
            "HTTP requests by path and status.",
            ["path", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "poolrag_request_duration_seconds",
            "Time from request to response, by path.",
            ["path"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.engine_latency = Histogram(
            "poolrag_engine_duration_seconds",
            "Time a request spends waiting for and running on the engine, by model and path.",
            ["model", "path"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.prompt_tokens = Counter(
            "poolrag_prompt_tokens",
            "Tokens the model read, by model and path.",
            ["model", "path"],
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "poolrag_request_batch_size",
            "Inputs (texts, pairs, documents) per request, by model and path.",
            ["model", "path"],
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "poolrag_queue_depth",
            "Requests admitted and waiting for or running on the model's engine.",
            ["model"],
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        self.queue_capacity = Gauge(
            "poolrag_queue_capacity",
            "Most requests admitted at once per model (--max-queue).",
            ["model"],
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        self.rejected = Counter(
            "poolrag_queue_rejections",
            "Requests refused with 503 because the queue or a byte or token budget was full.",
            ["model"],
            registry=self.registry,
        )
        self.inflight_bytes = Gauge(
            "poolrag_inflight_body_bytes",
            "Request body bytes held by admitted requests.",
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        self.inflight_tokens = Gauge(
            "poolrag_inflight_tokens",
            "Token ids plus estimated text tokens of requests being parsed or run.",
            ["model"],
            multiprocess_mode="livesum",
            registry=self.registry,
        )

    def start_model(self, model: str, max_queue: int) -> None:
        """Show a model's queue, token and rejection series from the first scrape, at zero."""
        self.queue_capacity.labels(model).set(max_queue)
        self.queue_depth.labels(model).set(0)
        self.inflight_tokens.labels(model).set(0)
        self.rejected.labels(model)

    def sync(self) -> None:
        """Multiprocess mode: adds what this worker's engine cores did since the last call."""
        if self.core_counters is not None:
            self.core_counters.sync()

    def render(self) -> bytes:
        """The exposition: this app's registry, or in multiprocess mode every worker's values summed
        (and the answering worker's tune report: each worker tunes the same model on the same CPUs)."""
        if not multiprocess_mode():
            return generate_latest(self.registry)
        self.sync()
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        registry.register(self.tune)
        return generate_latest(registry)


def _template(routes: Iterable[BaseRoute], probe: Scope) -> str | None:
    """The path template of the route ``probe`` reaches (``/v1/models/{model:path}``), looked for
    inside included routers too; None when no route matches."""
    for route in routes:
        if route.matches(probe)[0] is Match.NONE:
            continue
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path
        router = getattr(route, "original_router", route)  # FastAPI keeps an included router's routes
        return _template(getattr(router, "routes", ()), probe) or probe["path"]
    return None


class MetricsMiddleware:
    """Counts every response, including those the auth and size middleware answer themselves.

    Paths that are not routes of the app are counted under one label, and a route with a parameter
    under its template (``/v1/models/{model}``), so a scanner cannot blow up the number of time
    series. A path is a route when one of the app's routes matches it (any
    method: a 405 is counted under its path), those left out of the API description included
    (``/ping``, ``/docs``, TEI's ``/embeddings``); the routes are read when asked (``routes``), so
    after the app is complete, and each path found is remembered. A request whose client
    disconnected before the answer started is counted as 499, whatever the app did next: it was
    neither served nor a fault.
    """

    def __init__(
        self, app: ASGIApp, metrics: ServerMetrics, routes: Callable[[], Iterable[BaseRoute]]
    ) -> None:
        self.app = app
        self.metrics = metrics
        self._routes = routes
        self._known: set[str] = set()

    def _label(self, scope: Scope) -> str:
        path = route_path(scope)
        if path in self._known:
            return path
        probe = {**scope, "path": path, "root_path": ""}
        label = _template(self._routes(), probe)
        if label is None:
            return UNMATCHED_PATH
        if label == path:  # a fixed path is remembered; a template's paths are as many as callers like
            self._known.add(path)
        return label

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        label = self._label(scope)
        started = time.perf_counter()
        status: int | None = None
        gone_first = False

        async def receive_watching() -> Message:
            nonlocal gone_first
            message = await receive()
            if message["type"] == "http.disconnect" and status is None:
                gone_first = True
            return message

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start" and status is None:
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive_watching, send_with_status)
        finally:
            if gone_first:
                status = CLIENT_CLOSED
            self.metrics.requests.labels(label, str(status or 500)).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)
            self.metrics.sync()
