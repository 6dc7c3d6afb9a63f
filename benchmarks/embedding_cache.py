#!/usr/bin/env python3
"""The embedding cache's file size and speed per vector size.

    python benchmarks/embedding_cache.py [--vector-mb 30] [--dims 384,512,768,1024,1536]

For each size, ``EmbeddingCache`` stores ``--vector-mb`` of random float32 vectors in batches of 64
(the CLI's batch), then reads them all back in shuffled batches of 64 (hits, each of which also
records its use). Prints the file's bytes (after a WAL checkpoint) over the vectors' bytes, which
is what ``--cache-max-gb`` bounds, and writes and reads per second. Run it at two commits to
compare layouts.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
from common import machine, table

from poolrag.cache import EmbeddingCache

BATCH = 64


def _measure(dim: int, vector_bytes: int, folder: Path) -> list[object]:
    count = vector_bytes // (4 * dim)
    rng = np.random.default_rng(dim)
    keys = [hashlib.blake2b(i.to_bytes(8, "little"), digest_size=32).digest() for i in range(count)]
    vectors = rng.standard_normal((count, dim), dtype=np.float32)
    path = folder / f"cache-{dim}.sqlite"
    with EmbeddingCache(path, max_bytes=2 * vector_bytes) as cache:
        start = time.perf_counter()
        for at in range(0, count, BATCH):
            cache.put_many(zip(keys[at : at + BATCH], vectors[at : at + BATCH], strict=True))
        written = time.perf_counter() - start
        order = rng.permutation(count)
        start = time.perf_counter()
        for at in range(0, count, BATCH):
            found = cache.get_many([keys[i] for i in order[at : at + BATCH]])
            assert len(found) == len(order[at : at + BATCH])
        read = time.perf_counter() - start
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ratio = path.stat().st_size / (count * 4 * dim)
    return [dim, count, round(ratio, 2), count / written, count / read]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vector-mb", type=float, default=30.0, help="vector bytes per size (default: 30)")
    parser.add_argument("--dims", default="384,512,768,1024,1536", help="vector sizes (default: %(default)s)")
    args = parser.parse_args()
    vector_bytes = int(args.vector_mb * 1e6)
    with tempfile.TemporaryDirectory() as folder:
        rows = [_measure(int(dim), vector_bytes, Path(folder)) for dim in args.dims.split(",")]
    print(machine())
    print(table(["dims", "vectors", "file / vector bytes", "writes/s", "reads/s"], rows))


if __name__ == "__main__":
    main()
