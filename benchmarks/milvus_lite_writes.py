#!/usr/bin/env python3
"""Whether releasing a Milvus Lite collection while an ingest writes would help: time and RSS of
the same upserts into a loaded and a released collection (the store keeps it loaded).

    python benchmarks/milvus_lite_writes.py [--rows 200000] [--batch 64] [--dim 32]

Each state runs in its own child process (RSS is per process), on the raw pymilvus client the store
drives, with the store's memtable bound: ``--rows`` prose-sized rows (1.2 KB of text, random
vectors) upserted ``--batch`` at a time. A loaded collection indexes every segment it flushes or
merges in the background; a released one does not, and a search afterwards needs a load (timed
too: it indexes the final segments once). RSS is sampled after every 20,000 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, table


def _rss_mib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def child(state: str, rows: int, batch: int, dim: int) -> dict[str, object]:
    from poolrag.stores.milvus import LITE_MEMTABLE_BYTES

    os.environ.setdefault("MILVUS_LITE_MEMTABLE_MEMORY_LIMIT_BYTES", str(LITE_MEMTABLE_BYTES))
    from pymilvus import DataType, MilvusClient

    rng = random.Random(7)
    words = ["honeybee", "colony", "forager", "tide", "moon", "ocean", "sourdough", "yeast", "crust"]
    text = " ".join(rng.choice(words) for _ in range(170))  # ~1.2 KB, a prose chunk
    with tempfile.TemporaryDirectory(prefix="poolrag-lite-writes-") as tmp:
        client = MilvusClient(uri=str(Path(tmp) / "w.db"), timeout=300)
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        schema.add_field("source", DataType.VARCHAR, max_length=512)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
        client.create_collection("w", schema=schema, index_params=index)
        if state == "released":
            client.release_collection("w")
        curve = []
        started = time.perf_counter()
        for first in range(0, rows, batch):
            part = [
                {"id": f"c{i}", "vector": [rng.random() for _ in range(dim)], "source": "a.txt", "text": text}
                for i in range(first, min(first + batch, rows))
            ]
            client.upsert("w", part)
            if (first + batch) // 20000 != first // 20000:
                curve.append((first + len(part), _rss_mib()))
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        client.load_collection("w")
        hits = client.search("w", [[0.5] * dim], limit=1)
        load_s = time.perf_counter() - started
        assert len(hits[0]) == 1
        client.close()
    return {"write_s": write_s, "load_s": load_s, "curve": curve, "rss_end": _rss_mib()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--child", choices=("loaded", "released"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.rows, args.batch, args.dim)))
        return 0
    results = {}
    for state in ("loaded", "released"):
        command = [sys.executable, __file__, "--child", state, "--rows", str(args.rows)]
        command += ["--batch", str(args.batch), "--dim", str(args.dim)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[state] = json.loads(out.strip().splitlines()[-1])
    print(machine())
    print(f"{args.rows} rows of ~1.2 KB text, {args.dim}-dim vectors, upserted {args.batch} at a time")
    rows = [
        [state, f"{r['write_s']:.1f}", f"{r['load_s']:.2f}", str(r["curve"][-1][1] if r["curve"] else "-")]
        for state, r in results.items()
    ]
    print(table(["collection", "upserts s", "load + search s", "RSS MiB at the end"], rows))
    for state, r in results.items():
        print(f"{state} RSS curve (rows, MiB): {r['curve']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
