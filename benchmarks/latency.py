"""Latency of one short query: p50/p99 over many calls (poolrag sync and asyncio, sentence-transformers).

python benchmarks/latency.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np
from common import machine, minilm_path, table
from corpus import queries


def percentiles(samples: list[float]) -> tuple[float, float]:
    ms = np.array(samples) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print(machine())
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    path = minilm_path()
    engine = Engine(path)
    st = SentenceTransformer(str(path), device="cpu")
    qs = queries(args.calls, seed=5)
    for q in qs[:20]:  # warm-up
        engine.embed_array([q])
        st.encode([q])

    def sync_calls() -> list[float]:
        out = []
        for q in qs:
            start = time.perf_counter()
            engine.embed_array([q])
            out.append(time.perf_counter() - start)
        return out

    async def async_calls() -> list[float]:
        out = []
        for q in qs:
            start = time.perf_counter()
            await engine.aembed_array([q])
            out.append(time.perf_counter() - start)
        return out

    def st_calls() -> list[float]:
        out = []
        for q in qs:
            start = time.perf_counter()
            st.encode([q])
            out.append(time.perf_counter() - start)
        return out

    rows = []
    for name, samples in (
        ("poolrag embed_array (sync)", sync_calls()),
        ("poolrag aembed_array (asyncio)", asyncio.run(async_calls())),
        ("sentence-transformers encode", st_calls()),
    ):
        p50, p99 = percentiles(samples)
        rows.append([name, len(samples), p50, p99])
    print(table(["engine", "calls", "p50 ms", "p99 ms"], rows))


if __name__ == "__main__":
    main()
