"""How much of a Milvus Lite collection sits in this process's memory, and saying so once.

Milvus Lite 3.x runs inside the process that opens the ``.db`` file and keeps every flushed segment
loaded (an Arrow table of all columns, the primary keys and a key-to-row map, the vector index), so
an ingest's RSS grows ~2.6 KB per prose chunk of 32-dim vectors however the rest streams
(benchmarks/RESULTS.md, "Ingest memory: which sink keeps RSS flat"). Releasing the collection does
not help: it drops only the segment indexes, while every data file the manifest lists stays in
Milvus Lite's segment cache whatever the load state (benchmarks/milvus_lite_writes.py: RSS grows
alike, released or loaded, and the load after a released ingest indexes every row at once). Nothing
on poolrag's side can page those rows out; what it can do is tell the user, when a collection gets
large, which stores keep rows on disk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

# Measured on Milvus Lite 3.2.2: flushed segments hold the row's text and vector plus ~1.2 KB of
# keys, maps and Arrow bookkeeping (2.6 KB per 1.3 KB prose chunk with 32-dim vectors).
ROW_OVERHEAD_BYTES = 1200
# Rows held past this many bytes, on top of the ~650 MiB a CPU ingest needs for its model and
# libraries, take the process past 1.5 GB once Milvus Lite merges segments (1,537 MiB at ~185,000
# chunks in the 500 MB run).
RESIDENT_BOUND_BYTES = 512 << 20


def row_bytes(row: dict[str, Any]) -> int:
    """Estimated bytes one stored row keeps in memory."""
    text = row.get("text")
    size = ROW_OVERHEAD_BYTES + 4 * len(row.get("vector", ()))
    if isinstance(text, str):
        size += len(text.encode("utf-8", "surrogatepass"))
    return size


class ResidentRows:
    """Estimated bytes of a Milvus Lite collection held in memory, with one warning past the bound.

    ``stored_chunks`` is asked once, on the first write, for what the file held already (estimated
    at the size of that first write's rows)."""

    def __init__(self, database: str, collection: str, stored_chunks: Callable[[], int]) -> None:
        self._where = f"collection {collection!r} in {database}"
        self._stored_chunks = stored_chunks
        self._chunks = -1
        self._bytes = 0
        self._warned = False

    def add(self, rows: Sequence[dict[str, Any]], chunks: int) -> None:
        """Count ``rows`` (``chunks`` chunks) just written; warn once when the total passes the bound."""
        if self._warned or not rows:
            return
        written = sum(row_bytes(row) for row in rows)
        if self._chunks < 0:
            before = self._stored_chunks()
            self._chunks = before
            self._bytes = before * written // max(chunks, 1)
        self._chunks += chunks
        self._bytes += written
        if self._bytes > RESIDENT_BOUND_BYTES:
            self._warned = True
            logger.warning(
                "Milvus Lite keeps every stored row of %s in this process's memory (~%d chunks, ~%d MiB "
                "so far, growing with each one); for a corpus this size use --store qdrant-edge (rows on "
                "disk) or a Milvus server (--uri http://HOST:19530)",
                self._where,
                self._chunks,
                self._bytes >> 20,
            )
