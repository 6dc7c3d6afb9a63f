"""Retry with exponential backoff for store calls that fail because the database is unreachable.

Only :class:`StoreUnavailableError` (connection refused, timeouts, a local file locked by another
process) is retried; a bad request fails at once. Store writes are idempotent upserts keyed by
content ids, so repeating a batch after a failed attempt can never duplicate anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from poolrag.counts import check_count
from poolrag.stores.errors import StoreUnavailableError

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all, sleeping ``base_delay * 2**n`` (capped at ``max_delay``) in between."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0

    def __post_init__(self) -> None:
        check_count(self.attempts, "attempts")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays must not be negative")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))

    def call(self, fn: Callable[[], T], what: str, where: str) -> T:
        """Run ``fn``; on :class:`StoreUnavailableError` wait and retry, then raise a summary error."""
        started = time.monotonic()
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except StoreUnavailableError as exc:
                if attempt == self.attempts:
                    elapsed = time.monotonic() - started
                    tries = "once" if self.attempts == 1 else f"{self.attempts} times over {elapsed:.1f}s"
                    raise StoreUnavailableError(
                        f"{where} is unavailable: {what} failed {tries} "
                        f"(last error: {exc}). Check that the database is running and reachable, "
                        "or that no other process holds a local database file open.",
                        attempts=self.attempts,
                    ) from exc
                pause = self.delay(attempt)
                logger.warning(
                    "%s: %s failed (%s); retry %d/%d in %.2fs",
                    where,
                    what,
                    exc,
                    attempt,
                    self.attempts - 1,
                    pause,
                )
                time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def call_client(
        self, fn: Callable[[], T], what: str, where: str, unavailable: Callable[[Exception], str | None]
    ) -> T:
        """:meth:`call` for a database client's own exceptions: ``unavailable`` returns the message of
        one that means the database is unreachable (raised as :class:`StoreUnavailableError`, so it is
        retried), ``None`` for any other, which propagates at once."""

        def attempt() -> T:
            try:
                return fn()
            except Exception as exc:
                message = unavailable(exc)
                if message is None:
                    raise
                raise StoreUnavailableError(message) from exc

        return self.call(attempt, what, where)
