"""An embedder and a reranker in one ``poolrag serve`` process vs two processes on the same cores.

    python benchmarks/multi_model.py [--callers 4] [--loops 40] [--passages 30] [--rounds 2]

Each caller runs a retrieve-then-rerank loop against a live server over HTTP: embed one query
(``/v1/embeddings``, model ``embedder``), then rerank ``--passages`` passages for it (``/rerank``,
model ``reranker``). One process: ``poolrag serve MINILM MS-MARCO`` (two models, one torch thread
pool). Two processes: one ``poolrag serve`` per model, each with torch's default thread count.
Reports loops/s and the p50 / p99 of one loop's latency; the two setups alternate ``--rounds``
times so that other load on a shared machine falls on both.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import numpy as np
from common import cross_encoder_path, machine, minilm_path, poolrag_server, table
from corpus import mixed_corpus


@contextmanager
def _server(*args: str) -> Iterator[str]:
    with poolrag_server(*args) as (_, url):
        yield url


def _run(
    embed_url: str, rerank_url: str, callers: int, loops: int, texts: list[str], passages: int
) -> tuple[float, list[float]]:
    """All callers' loops: (wall seconds, per-loop latencies)."""
    latencies: list[float] = []
    lock = threading.Lock()

    def caller(seed: int) -> None:
        rng = np.random.default_rng(seed)
        with httpx.Client(timeout=300) as http:
            for _ in range(loops):
                query = texts[int(rng.integers(len(texts)))]
                picked = [texts[int(i)] for i in rng.choice(len(texts), passages, replace=False)]
                started = time.perf_counter()
                http.post(
                    f"{embed_url}/v1/embeddings", json={"model": "embedder", "input": query}
                ).raise_for_status()
                body = {"model": "reranker", "query": query, "documents": picked, "top_n": 5}
                http.post(f"{rerank_url}/rerank", json=body).raise_for_status()
                with lock:
                    latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--loops", type=int, default=40, help="loops per caller per round")
    parser.add_argument("--passages", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine())
    texts = mixed_corpus(500, seed=5)
    embedder, reranker = str(minilm_path()), str(cross_encoder_path())
    totals: dict[str, list[float]] = {"one process": [], "two processes": []}
    walls: dict[str, float] = {"one process": 0.0, "two processes": 0.0}
    for _ in range(args.rounds):
        for setup in totals:
            with ExitStack() as stack:
                if setup == "one process":
                    url = stack.enter_context(
                        _server(embedder, reranker, "--served-model-name", "embedder", "reranker")
                    )
                    urls = (url, url)
                else:
                    urls = (
                        stack.enter_context(_server(embedder, "--served-model-name", "embedder")),
                        stack.enter_context(_server(reranker, "--served-model-name", "reranker")),
                    )
                _run(*urls, callers=1, loops=3, texts=texts, passages=args.passages)  # warm up
                wall, latencies = _run(*urls, args.callers, args.loops, texts, args.passages)
            walls[setup] += wall
            totals[setup] += latencies
    rows = []
    for setup, latencies in totals.items():
        ms = np.array(latencies) * 1000
        rows.append(
            [
                setup,
                f"{len(latencies) / walls[setup]:.2f}",
                f"{np.percentile(ms, 50):.0f}",
                f"{np.percentile(ms, 99):.0f}",
            ]
        )
    print(
        f"{args.callers} callers x {args.loops} loops x {args.rounds} rounds; "
        f"a loop: embed 1 query + rerank {args.passages} passages"
    )
    print(table(["setup", "loops/s", "p50 ms", "p99 ms"], rows))


if __name__ == "__main__":
    main()
