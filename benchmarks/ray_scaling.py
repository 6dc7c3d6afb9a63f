"""Ingestion throughput: the single-process pipeline vs Ray Data with 1 and 2 embedding actors.

Every run starts from documents and ends with every chunk stored (Qdrant local mode, a fresh
collection, no embedding cache), model loading included: that is what a user waits for. The Ray
cluster is started once, before the runs, and its start-up is reported on its own. Runs are
alternated (single, ray x1, ray x2, single, ...) and the medians reported, so drift on a shared
machine hits every variant alike. ``overhead`` is a Ray run's median minus the single-process
median: actor start-up, the model load per actor, the probe, moving rows through the object store.

    python benchmarks/ray_scaling.py --docs 200 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

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
    from poolrag.ingest import read_paths
    from poolrag.scaleout.ray_ingest import EngineRecipe, RayIngestOptions, ingest_on_ray
    from poolrag.stores import open_store

    started = time.perf_counter()
    store = open_store("qdrant", "bench", path=str(work / "qdrant"))
    report = ingest_on_ray(
        read_paths([corpus]), store, EngineRecipe(model), options=RayIngestOptions(workers=workers)
    )
    store.close()
    return time.perf_counter() - started, report.upserted


def count_tokens(model: str, corpus: Path) -> tuple[int, int]:
    from poolrag import Engine
    from poolrag.ingest import TokenChunker, read_paths

    engine = Engine(model)
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts)
    chunks = [c for d in read_paths([corpus]) for c in chunker.iter_chunks(d)]
    return len(chunks), sum(c.num_tokens for c in chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="default: the packaged all-MiniLM-L6-v2")
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=os.cpu_count(), help="CPUs the local Ray cluster offers")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.model is None:
        from common import minilm_path

        args.model = str(minilm_path())

    import ray
    import torch

    scratch = Path(tempfile.mkdtemp(prefix="ray_scaling-"))
    corpus = write_corpus(scratch / "corpus", args.docs)
    chunks, tokens = count_tokens(args.model, corpus)
    started = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, _node_ip_address="127.0.0.1")
    ray.data.DataContext.get_current().enable_progress_bars = False
    cluster_start = time.perf_counter() - started
    variants = {
        "single process": lambda work: single_process(args.model, corpus, work),
        "ray, 1 worker": lambda work: on_ray(args.model, corpus, work, 1),
        "ray, 2 workers": lambda work: on_ray(args.model, corpus, work, 2),
    }
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.rounds):
        for name, run in variants.items():
            work = scratch / f"{round_}-{name.replace(' ', '_').replace(',', '')}"
            elapsed, stored = run(work)
            assert stored == chunks, (name, stored, chunks)
            seconds[name].append(elapsed)
            shutil.rmtree(work, ignore_errors=True)
            print(f"round {round_ + 1} {name}: {elapsed:.1f}s", flush=True)
    ray.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)

    base = statistics.median(seconds["single process"])
    results = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU"
        if not torch.cuda.is_available()
        else torch.cuda.get_device_name(),
        "docs": args.docs,
        "chunks": chunks,
        "tokens": tokens,
        "rounds": args.rounds,
        "ray_cluster_start_s": round(cluster_start, 1),
        "variants": {},
    }
    print(f"\n{args.docs} docs, {chunks} chunks, {tokens} tokens; Ray cluster start {cluster_start:.1f}s")
    print(f"{'variant':16} {'median s':>9} {'chunks/s':>9} {'tokens/s':>9} {'overhead s':>11}")
    for name, values in seconds.items():
        median = statistics.median(values)
        row = {
            "median_s": round(median, 2),
            "chunks_per_s": round(chunks / median, 1),
            "tokens_per_s": round(tokens / median),
            "overhead_s": round(median - base, 2),
            "runs_s": [round(v, 2) for v in values],
        }
        results["variants"][name] = row
        print(
            f"{name:16} {median:9.1f} {row['chunks_per_s']:9.1f} {row['tokens_per_s']:9d} "
            f"{row['overhead_s']:11.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
