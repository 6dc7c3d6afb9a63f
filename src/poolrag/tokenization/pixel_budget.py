"""The pixels of the images being decoded at once, bounded: each image holds its pixel count (from
its header, before a pixel is decoded) while it is decoded and prepared, and waits its turn, in
order of arrival, while the others hold too many. One image alone is always let through.

A call's images are prepared on up to 8 threads; an image at the per-image cap (64 million
pixels) takes about 0.9 GB while it is decoded and prepared for CLIP, so eight at once took 7 GB.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager


class PixelBudget:
    """At most ``capacity`` pixels held at once, by images taken in order of arrival."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.held = 0
        self._turns: deque[int] = deque()
        self._tickets = itertools.count()
        self._changed = threading.Condition()

    @property
    def waiting(self) -> int:
        """Images waiting for their turn."""
        with self._changed:
            return len(self._turns)

    @contextmanager
    def hold(self, pixels: int) -> Iterator[None]:
        """Hold ``pixels`` while the block runs, once the images before have room beside them."""
        with self._changed:
            ticket = next(self._tickets)
            self._turns.append(ticket)
            try:
                self._changed.wait_for(lambda: self._turns[0] == ticket and self._fits(pixels))
            finally:
                self._turns.remove(ticket)
                self._changed.notify_all()
            self.held += pixels
        try:
            yield
        finally:
            with self._changed:
                self.held -= pixels
                self._changed.notify_all()

    def _fits(self, pixels: int) -> bool:
        return self.held == 0 or self.held + pixels <= self.capacity
