"""Shared data and helpers of the store tests (imported by conftest and the tests)."""

from __future__ import annotations

import socket
from pathlib import Path

from poolrag.stores import RetryPolicy

SENTENCES = [
    "Honeybees tell each other where flowers are with a waggle dance.",
    "The Moon's gravity pulls the oceans into two tidal bulges.",
    "Sourdough rises thanks to wild yeast and lactic acid bacteria.",
    "Rust's borrow checker forbids data races at compile time.",
    "Index funds track a market index at very low cost.",
    "Coral bleaching happens when corals expel their algae.",
]
#: The database stores, and ``process``: a store the tests register (process_store.py), so the shared
#: tests show that a store written as one file plus one registry line behaves as the built-in ones.
STORE_KINDS = ["milvus", "qdrant", "qdrant-edge", "process"]
#: Every store that searches, the in-process one included (it has no location to reopen).
SEARCH_KINDS = [*STORE_KINDS, "memory"]
FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)


def store_location(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "milvus.db")} if kind == "milvus" else {"path": str(root / kind)}


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
