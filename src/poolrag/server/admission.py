"""A bounded queue in front of the engine: overload is answered with 503, not an ever-growing wait."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from poolrag.server.errors import APIError
from poolrag.server.metrics import ServerMetrics


class Admission:
    """Admits at most ``capacity`` requests at once; the next one gets 503 with ``Retry-After``.

    Runs on the event loop only, so a plain counter is safe.
    """

    def __init__(self, capacity: int, retry_after_s: int, metrics: ServerMetrics) -> None:
        self.capacity = capacity
        self.retry_after_s = retry_after_s
        self.metrics = metrics
        self.depth = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.depth >= self.capacity:
            self.metrics.rejected.inc()
            raise APIError(
                503,
                f"the server is at capacity ({self.capacity} requests queued); retry after "
                f"{self.retry_after_s}s",
                code="queue_full",
                headers={"Retry-After": str(self.retry_after_s)},
            )
        self.depth += 1
        self.metrics.queue_depth.set(self.depth)
        try:
            yield
        finally:
            self.depth -= 1
            self.metrics.queue_depth.set(self.depth)
