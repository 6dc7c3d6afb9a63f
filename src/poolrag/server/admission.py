"""Bounded admission in front of the engine: requests, body bytes and tokens in flight.

A queue length alone does not bound memory (256 admitted 16 MB requests are gigabytes), so each
request also reserves its body's bytes while it is read and parsed, and its tokens while it waits
for and runs on the engine. Overload is answered with 503 + ``Retry-After``, not an ever-growing
wait. One request alone is always admitted, so a request larger than a budget is still served
when the server is otherwise idle (the per-request limits bound it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from poolrag.server.errors import APIError
from poolrag.server.metrics import ServerMetrics


class Reservation:
    """Bytes held by one request's body; grows as a chunked body streams in."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.held = 0

    def grow_to(self, total: int) -> None:
        """Hold ``total`` bytes in all, or raise the 503 when the budget cannot take them."""
        extra = total - self.held
        if extra <= 0:
            return
        admission = self.admission
        if admission.bytes_in_flight > self.held and admission.bytes_in_flight + extra > admission.max_bytes:
            raise admission.busy(f"request bodies in flight exceed {admission.max_bytes} bytes")
        admission.bytes_in_flight += extra
        self.held = total
        admission.metrics.inflight_bytes.set(admission.bytes_in_flight)

    def release(self) -> None:
        self.admission.bytes_in_flight -= self.held
        self.held = 0
        self.admission.metrics.inflight_bytes.set(self.admission.bytes_in_flight)


class Admission:
    """Counts requests, body bytes and tokens in flight; runs on the event loop only, so plain
    counters are safe. Each served model has its own; the body bytes of every request are counted
    in the first model's, the process's one byte budget (a body is read before it names a model)."""

    def __init__(
        self,
        capacity: int,
        max_bytes: int,
        max_tokens: int,
        retry_after_s: int,
        metrics: ServerMetrics,
        model: str,
    ) -> None:
        self.model = model  # the ``model`` label of its queue, token and rejection metrics
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.max_tokens = max_tokens
        self.retry_after_s = retry_after_s
        self.metrics = metrics
        self.depth = 0
        self.bytes_in_flight = 0
        self.tokens_in_flight = 0

    def busy(self, why: str) -> APIError:
        self.metrics.rejected.labels(self.model).inc()
        return APIError(
            503,
            f"the server is at capacity ({why}); retry after {self.retry_after_s}s",
            code="queue_full",
            headers={"Retry-After": str(self.retry_after_s)},
        )

    @contextmanager
    def body_bytes(self) -> Iterator[Reservation]:
        """A reservation for one body, released when the request is answered."""
        reservation = Reservation(self)
        try:
            yield reservation
        finally:
            reservation.release()

    @contextmanager
    def tokens(self, count: int) -> Iterator[None]:
        """Hold ``count`` tokens while the request is parsed into prompts and run."""
        if self.tokens_in_flight and self.tokens_in_flight + count > self.max_tokens:
            raise self.busy(f"tokens in flight exceed {self.max_tokens}")
        self.tokens_in_flight += count
        self.metrics.inflight_tokens.labels(self.model).set(self.tokens_in_flight)
        try:
            yield
        finally:
            self.tokens_in_flight -= count
            self.metrics.inflight_tokens.labels(self.model).set(self.tokens_in_flight)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.depth >= self.capacity:
            raise self.busy(f"{self.capacity} requests queued")
        self.depth += 1
        self.metrics.queue_depth.labels(self.model).set(self.depth)
        try:
            yield
        finally:
            self.depth -= 1
            self.metrics.queue_depth.labels(self.model).set(self.depth)
