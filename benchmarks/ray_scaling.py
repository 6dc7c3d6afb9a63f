"""Scaling on Ray: ingestion by Ray Data actors, and ``poolrag serve --ray`` replicas, against one process.

Ingestion: every run starts from documents and ends with every chunk stored (Qdrant local mode, a
fresh collection, no embedding cache), model loading included: that is what a user waits for. The
Ray cluster is started once, before the runs, and its start-up is reported on its own. Runs are
alternated (single, ray x1, ray x2, single, ...) and the medians reported, so drift on a shared
machine hits every variant alike. ``overhead`` is a Ray run's median minus the single-process
median: actor start-up, the model load per actor, the probe, moving rows through the object store.
The single process takes as many torch threads as the cluster has CPUs (``--cpus``).

Serving (``--replicas``): ``poolrag serve MODEL --ray ADDRESS --replicas N`` joins the benchmark's
cluster (each replica reserves one CPU, the CLI's default plan, so one torch thread), and a closed
loop of ``--connections`` requests in flight, spread over ``--clients`` processes, posts
``/v1/embeddings`` for ``--serve-seconds``; plain ``poolrag serve MODEL`` (one process, every core)
is the baseline.

``--budget-s`` bounds the whole run: no run starts that the time left cannot hold (judged by the
longest run of its kind so far), and SIGTERM (``timeout``) abandons the run in progress; either way
the tables print what was measured, and every run prints its own line as it ends.

    python benchmarks/ray_scaling.py --docs 200 --rounds 3
    python benchmarks/ray_scaling.py --cpus 16 --workers 1,2,4,8 --replicas 1,2,4 --budget-s 150
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from common import poolrag_server, table

logging.basicConfig(level=logging.WARNING)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

WORDS = [
    "honeybee",
    "forager",
    "waggle",
    "dance",
    "angle",
    "sun",
    "distance",
    "flower",
    "colony",
    "swarm",
    "spring",
    "queen",
    "worker",
    "drone",
    "tide",
    "moon",
    "gravity",
    "bulge",
    "ocean",
    "neap",
    "spring",
    "quarter",
    "sourdough",
    "starter",
    "yeast",
    "lactic",
    "dough",
    "proof",
    "crust",
    "steam",
    "loaf",
    "ownership",
    "borrow",
    "checker",
    "reference",
    "race",
    "compile",
    "opening",
    "centre",
    "knight",
    "bishop",
]


def write_corpus(root: Path, docs: int) -> Path:
    """``docs`` Markdown files of about 600 words each (a few chunks apiece), seeded text."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(docs):
        paragraphs = []
        for p in range(6):
            words = [WORDS[(n * 7 + p * 13 + k * k) % len(WORDS)] for k in range(100)]
            paragraphs.append(" ".join(words).capitalize() + ".")
        (root / f"doc{n:04d}.md").write_text(f"# Note {n}\n\n" + "\n\n".join(paragraphs))
    return root


def single_process(model: str, corpus: Path, work: Path) -> tuple[float, int]:
    from poolrag import Engine
    from poolrag.cache import CachedEmbedder
    from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
    from poolrag.stores import open_store

    started = time.perf_counter()
    engine = Engine(model)
    store = open_store("qdrant", "bench", path=str(work / "qdrant"))
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts)
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(engine, None)),
        chunker,
        checkpoint_dir=work / "ck",
        progress=False,
    )
    report = pipeline.run(read_paths([corpus]))
    store.close()
    return time.perf_counter() - started, report.upserted


def on_ray(model: str, corpus: Path, work: Path, workers: int) -> tuple[float, int]:
    import ray

    from poolrag.ingest import read_paths
    from poolrag.scaleout.ray_ingest import EngineRecipe, RayIngestOptions, ingest_on_ray
    from poolrag.stores import open_store

    # one GPU each (the default) leaves actors past the cluster's GPUs unscheduled: they share them
    gpus = ray.cluster_resources().get("GPU", 0)
    options = RayIngestOptions(workers=workers, gpus_per_worker=min(1.0, gpus / workers) if gpus else None)
    started = time.perf_counter()
    store = open_store("qdrant", "bench", path=str(work / "qdrant"))
    report = ingest_on_ray(read_paths([corpus]), store, EngineRecipe(model), options=options)
    store.close()
    return time.perf_counter() - started, report.upserted


def count_tokens(model: str, corpus: Path) -> tuple[int, int]:
    from poolrag import Engine
    from poolrag.ingest import TokenChunker, read_paths

    engine = Engine(model)
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts)
    chunks = [c for d in read_paths([corpus]) for c in chunker.iter_chunks(d)]
    return len(chunks), sum(c.num_tokens for c in chunks)


class Budget:
    """The run's time limit: a run starts only while the time left holds the longest of its kind so far."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.stopped: str | None = None  # why runs stopped before the plan ran out

    def allows(self, what: str, expected_s: float) -> bool:
        if self.stopped is not None:
            return False
        if self.seconds is not None and time.monotonic() - self.started + expected_s > self.seconds:
            self.stopped = f"budget {self.seconds:g} s: {what} (~{expected_s:.0f} s) did not fit"
        return self.stopped is None


class Stopped(Exception):
    """SIGTERM (``timeout``): the run in progress is abandoned, the tables still print."""


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def counts(text: str) -> list[int]:
    """``1,2,4`` -> [1, 2, 4] (each a positive count)."""
    values = [int(part) for part in text.split(",") if part.strip()]
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"counts must be positive: {text}")
    return values


def run_ingest(
    variants: dict[str, Callable[[Path], tuple[float, int]]],
    rounds: int,
    chunks: int,
    scratch: Path,
    budget: Budget,
    seconds: dict[str, list[float]],
) -> None:
    """Every variant once a round, in turn, into ``seconds`` (filled as runs end, so an interrupted
    run keeps the ones before it); stops at the budget."""
    for round_ in range(rounds):
        for name, run in variants.items():
            seen = [v for values in seconds.values() for v in values]
            if not budget.allows(f"round {round_ + 1} {name}", max(seconds[name] or seen or [0.0])):
                return
            work = scratch / f"{round_}-{name.replace(' ', '_').replace(',', '')}"
            elapsed, stored = run(work)
            assert stored == chunks, (name, stored, chunks)
            seconds[name].append(elapsed)
            shutil.rmtree(work, ignore_errors=True)
            print(f"round {round_ + 1} {name}: {elapsed:.1f}s", flush=True)


def ingest_table(seconds: dict[str, list[float]], chunks: int, tokens: int) -> tuple[str, dict[str, dict]]:
    """The markdown table of the measured variants, and the same as JSON rows."""
    medians = {name: statistics.median(values) for name, values in seconds.items() if values}
    base, one = medians.get("single process"), medians.get("ray, 1 worker")
    rows, results = [], {}
    for name, median in medians.items():
        row = {
            "median_s": round(median, 2),
            "chunks_per_s": round(chunks / median, 1),
            "tokens_per_s": round(tokens / median),
            "overhead_s": round(median - base, 2) if base else None,
            "speedup_vs_1_worker": round(one / median, 2) if one and name.startswith("ray") else None,
            "speedup_vs_single": round(base / median, 2) if base else None,
            "runs_s": [round(v, 2) for v in seconds[name]],
        }
        results[name] = row
        rows.append(
            [
                name,
                round(median, 2),
                row["chunks_per_s"],
                _times(row["speedup_vs_1_worker"]),
                _times(row["speedup_vs_single"]),
                len(seconds[name]),
            ]
        )
    headers = ["run", "median s", "chunks/s", "speed-up vs 1 worker", "vs single process", "runs"]
    return table(headers, rows), results


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def request_body(texts_per_request: int) -> bytes:
    """One ``/v1/embeddings`` body: texts of 64 seeded words (about a short chunk each)."""
    texts = [
        " ".join(WORDS[(n * 11 + k * k) % len(WORDS)] for k in range(64)) for n in range(texts_per_request)
    ]
    return json.dumps({"model": SERVED_NAME, "input": texts}).encode()


def closed_loop(
    url: str, body: bytes, connections: int, begin: float, end: float
) -> tuple[int, int, list[float]]:
    """One client process: ``connections`` requests in flight (a new one as each answers)
    until ``end`` (wall clock, shared by the client processes). Counts the answers received in
    ``[begin, end]`` (before it: the warm-up): 200s, other answers and failures, 200s' latencies."""
    import asyncio

    import aiohttp

    async def clients() -> tuple[int, int, list[float]]:
        ok = errors = 0
        latencies: list[float] = []
        timeout = aiohttp.ClientTimeout(total=60)
        connector = aiohttp.TCPConnector(limit=connections)
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def one_connection() -> None:
                nonlocal ok, errors
                while (sent := time.time()) < end:
                    try:
                        async with session.post(url, data=body, headers=headers) as response:
                            await response.read()
                            good = response.status == 200
                    except (TimeoutError, aiohttp.ClientError):
                        good = False
                    done = time.time()
                    if begin <= done <= end:
                        if good:
                            ok += 1
                            latencies.append(done - sent)
                        else:
                            errors += 1

            await asyncio.gather(*(one_connection() for _ in range(connections)))
        return ok, errors, latencies

    time.sleep(max(begin - time.time() - WARMUP_S, 0))  # every process starts sending at once
    return asyncio.run(clients())


def load(url: str, body: bytes, texts: int, connections: int, processes: int, seconds: float) -> dict:
    """``connections`` requests in flight over ``processes`` client processes (spawned: this one is a
    Ray driver), after a warm-up of ``WARMUP_S``."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    begin = time.time() + CLIENT_START_S + WARMUP_S
    shares = [connections // processes + (i < connections % processes) for i in range(processes)]
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(closed_loop, f"{url}/v1/embeddings", body, share, begin, begin + seconds)
            for share in shares
            if share
        ]
        parts = [f.result() for f in futures]
    ok = sum(p[0] for p in parts)
    latencies = sorted(v for p in parts for v in p[2])

    def percentile(q: float) -> float | None:
        if not latencies:
            return None
        return round(1000 * latencies[min(int(q * len(latencies)), len(latencies) - 1)], 1)

    return {
        "requests_per_s": round(ok / seconds, 1),
        "texts_per_s": round(ok * texts / seconds, 1),
        "p50_ms": percentile(0.5),
        "p99_ms": percentile(0.99),
        "errors": sum(p[1] for p in parts),
    }


def run_serve(
    args: argparse.Namespace, address: str, gpus: float, budget: Budget, results: dict[str, dict]
) -> None:
    """Plain ``poolrag serve``, then ``poolrag serve --ray ADDRESS --replicas N`` for each N, each
    loaded for ``--serve-seconds``, into ``results``; the replicas' app is removed
    (``serve.shutdown``) after each. A point that fails is reported and the next one runs."""
    from ray import serve

    body = request_body(args.texts_per_request)
    plans = {"poolrag serve (1 process)": ()}
    for n in args.replicas:
        if gpus and n > gpus:  # a replica takes a whole GPU (the CLI's plan): the rest would never start
            print(f"serve: {n} replicas skipped, the cluster has {gpus:g} GPUs", flush=True)
            continue
        plans[f"ray serve, {n} replica{'s' if n > 1 else ''}"] = ("--ray", address, "--replicas", str(n))
    longest = args.serve_seconds + WARMUP_S + CLIENT_START_S + 30  # a first guess at start-up + load
    for name, extra in plans.items():
        if not budget.allows(f"serve {name}", longest):
            break
        started = time.perf_counter()
        try:
            # quiet=False: a replica that fails to start says why in this run's log
            with poolrag_server(
                args.model,
                "--served-model-name",
                SERVED_NAME,
                *extra,
                quiet=False,
                start_s=max(budget_left(budget), 30),
            ) as (_, url):
                start_s = time.perf_counter() - started
                point = load(
                    url, body, args.texts_per_request, args.connections, args.clients, args.serve_seconds
                )
        except Exception as exc:  # one failed point (a replica that did not start) ends only itself
            print(f"serve {name}: failed: {exc}", flush=True)
            continue
        finally:
            if extra:
                serve.shutdown()  # the CLI was stopped; Serve's detached app outlives it
        results[name] = {"start_s": round(start_s, 1), **point}
        longest = max(longest, time.perf_counter() - started)
        print(f"serve {name}: {json.dumps(results[name])}", flush=True)


def budget_left(budget: Budget) -> float:
    return 300.0 if budget.seconds is None else budget.seconds - (time.monotonic() - budget.started)


def serve_table(results: dict[str, dict]) -> str:
    base = results.get("poolrag serve (1 process)", {}).get("texts_per_s")
    one = results.get("ray serve, 1 replica", {}).get("texts_per_s")
    rows = []
    for name, row in results.items():
        rate = row["texts_per_s"]
        row["speedup_vs_1_replica"] = round(rate / one, 2) if one and name.startswith("ray") else None
        row["speedup_vs_single"] = round(rate / base, 2) if base else None
        rows.append(
            [
                name,
                rate,
                row["requests_per_s"],
                row["p50_ms"],
                row["p99_ms"],
                row["errors"],
                _times(row["speedup_vs_1_replica"]),
                _times(row["speedup_vs_single"]),
                row["start_s"],
            ]
        )
    headers = [
        "run",
        "texts/s",
        "requests/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "speed-up vs 1 replica",
        "vs single process",
        "start s",
    ]
    return table(headers, rows)


SERVED_NAME = "m"
WARMUP_S = 1.0  # answers in the first second of load are not counted
CLIENT_START_S = 3.0  # spawned client processes import aiohttp; all begin together after this


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="default: the packaged all-MiniLM-L6-v2")
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=os.cpu_count(), help="CPUs the local Ray cluster offers")
    parser.add_argument("--gpus", type=int, help="GPUs the local Ray cluster offers (default: Ray's count)")
    parser.add_argument("--workers", type=counts, default=[1, 2], help="Ray Data actor counts (default 1,2)")
    parser.add_argument("--replicas", type=counts, default=[], help="also serve: Ray Serve replica counts")
    parser.add_argument("--serve-seconds", type=float, default=5.0, help="load per serving run")
    parser.add_argument("--connections", type=int, default=32, help="requests in flight while serving")
    parser.add_argument("--clients", type=int, default=2, help="client processes sending them")
    parser.add_argument("--texts-per-request", type=int, default=16)
    parser.add_argument("--budget-s", type=float, help="start no run past this many seconds from the start")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    budget = Budget(args.budget_s)
    if args.model is None:
        from common import minilm_path

        args.model = str(minilm_path())

    import ray
    import torch

    # the single process gets the cores the Ray cluster offers, not every core the machine reports
    torch.set_num_threads(max(min(torch.get_num_threads(), args.cpus), 1))
    scratch = Path(tempfile.mkdtemp(prefix="ray_scaling-"))
    corpus = write_corpus(scratch / "corpus", args.docs)
    chunks, tokens = count_tokens(args.model, corpus)
    started = time.perf_counter()
    ray.init(num_cpus=args.cpus, num_gpus=args.gpus, include_dashboard=False, _node_ip_address="127.0.0.1")
    ray.data.DataContext.get_current().enable_progress_bars = False
    cluster_start = time.perf_counter() - started
    signal.signal(signal.SIGTERM, _stop)  # after ray.init, which installs its own handler
    cluster = ray.cluster_resources()
    variants: dict[str, Callable[[Path], tuple[float, int]]] = {
        "single process": lambda work: single_process(args.model, corpus, work)
    }
    for n in args.workers:
        variants[f"ray, {n} worker{'s' if n > 1 else ''}"] = partial(on_ray, args.model, corpus, workers=n)
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    served: dict[str, dict] = {}
    try:
        run_ingest(variants, args.rounds, chunks, scratch, budget, seconds)
        if args.replicas:
            run_serve(args, ray.get_runtime_context().gcs_address, cluster.get("GPU", 0), budget, served)
    except (Stopped, KeyboardInterrupt) as exc:
        budget.stopped = f"interrupted ({type(exc).__name__} {exc})"
    # what was measured, before the cluster goes (its shutdown can be slow)
    results = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU"
        if not torch.cuda.is_available()
        else torch.cuda.get_device_name(),
        "ray_cpus": cluster.get("CPU"),
        "ray_gpus": cluster.get("GPU", 0),
        "docs": args.docs,
        "chunks": chunks,
        "tokens": tokens,
        "rounds": args.rounds,
        "ray_cluster_start_s": round(cluster_start, 1),
        "stopped": budget.stopped,
        "elapsed_s": round(time.monotonic() - budget.started, 1),
    }
    print(f"\n{args.docs} docs, {chunks} chunks, {tokens} tokens; Ray cluster start {cluster_start:.1f}s")
    print(f"{results['machine']}; Ray: {cluster.get('CPU', 0):g} CPUs, {cluster.get('GPU', 0):g} GPUs")
    if budget.stopped:
        print(f"stopped early: {budget.stopped}")
    text, results["variants"] = ingest_table(seconds, chunks, tokens)
    if results["variants"]:
        print(f"\n{text}", flush=True)
    if served:
        print(
            f"\nserving: {args.connections} requests in flight, {args.texts_per_request} texts each, "
            f"{args.serve_seconds:g} s each\n\n{serve_table(served)}",
            flush=True,
        )
        results["serve"] = served
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ray.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
