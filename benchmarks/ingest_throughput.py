#!/usr/bin/env python3
"""Ingest throughput with a cold and a warm embedding cache, and the storage Matryoshka and
quantization save.

    python benchmarks/ingest_throughput.py [--copies 8] [--store milvus|qdrant|qdrant-edge] [--dimensions 64]

The corpus is ``samples/`` repeated ``--copies`` times (each copy made distinct so nothing is
deduplicated). "Cold" ingests it into a fresh collection with an empty cache; "warm" ingests the
same corpus into another fresh collection with the cache the cold run filled, so only chunking and
upserting remain. Storage compares the vectors a collection holds: full float32, the Matryoshka
size, and the per-vector code sizes of int8 and binary quantized indexes (which keep the originals
on disk and the codes in RAM), plus the measured on-disk size of the full and truncated collections.
The model is all-MiniLM-L6-v2 declared Matryoshka to measure the mechanism; it was not trained for
truncation, so the quality of its 64-dim prefix says nothing about real Matryoshka models.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _dir_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _corpus(copies: int):
    from poolrag.ingest import Document, read_paths

    base = list(read_paths([ROOT / "samples"]))
    return [Document(f"{d.source}#copy{k}", f"{d.text}\n\n(Copy {k}.)") for k in range(copies) for d in base]


def _location(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "milvus.db")} if kind == "milvus" else {"path": str(root / kind)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=8, help="times to repeat samples/ (default 8)")
    parser.add_argument("--store", choices=("milvus", "qdrant", "qdrant-edge"), default="milvus")
    parser.add_argument("--dimensions", type=int, default=64, help="Matryoshka size to compare (default 64)")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from poolrag import Engine
    from poolrag.cache import CachedEmbedder, EmbeddingCache
    from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, default_model
    from poolrag.stores import open_store

    engine = Engine(default_model(), hf_overrides={"is_matryoshka": True})
    docs = _corpus(args.copies)
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts)
    with tempfile.TemporaryDirectory(prefix="poolrag-bench-") as tmp:
        root = Path(tmp)
        cache = EmbeddingCache(root / "cache.sqlite")
        runs = {}
        for label, collection, dims in (
            ("cold cache", "full", None),
            ("warm cache", "full_again", None),
            (f"warm, {args.dimensions}-dim", "small", args.dimensions),
        ):
            store_root = root / collection
            store_root.mkdir()
            store = open_store(args.store, collection, **_location(args.store, store_root))
            embedder = CachedEmbedder(engine, cache)
            pipe = IngestPipeline(
                store,
                DenseEncoder(embedder, dims),
                chunker,
                batch_size=args.batch_size,
                checkpoint_dir=root,
                progress=False,
            )
            started = time.perf_counter()
            report = pipe.run(docs)
            elapsed = time.perf_counter() - started
            store.close()
            runs[label] = (report, elapsed, _dir_bytes(store_root))

        n = runs["cold cache"][0].upserted
        full_dim, small_dim = engine.embedding_dim, args.dimensions
        model = Path(engine.model_name)
        model_label = model.parent.name if model.name == "model" else engine.model_name
        print(
            f"corpus: {len(docs)} documents -> {n} chunks; model {model_label} (declared Matryoshka); "
            f"store {args.store}; CPU threads {os.cpu_count()}"
        )
        print("\ningest throughput")
        print(f"  {'run':<22}{'chunks/s':>10}{'embedded':>10}{'seconds':>9}")
        for label, (report, elapsed, _) in runs.items():
            print(f"  {label:<22}{report.upserted / elapsed:>10.1f}{report.embedded:>10}{elapsed:>9.2f}")
        speedup = runs["cold cache"][1] / runs["warm cache"][1]
        print(f"  warm cache is {speedup:.1f}x faster (no model calls)")

        print("\nstorage per collection (vectors only; payload text excluded)")
        rows = [
            (f"float32 x {full_dim} (full)", n * full_dim * 4),
            (f"float32 x {small_dim} (Matryoshka)", n * small_dim * 4),
            (f"int8 x {small_dim} (quantized codes)", n * small_dim),
            (f"binary x {small_dim} (quantized codes)", n * small_dim // 8),
            (f"int8 x {full_dim} (quantized codes)", n * full_dim),
            (f"binary x {full_dim} (quantized codes)", n * full_dim // 8),
        ]
        full_bytes = rows[0][1]
        for label, size in rows:
            print(f"  {label:<34}{size:>12,} bytes  {100 * (1 - size / full_bytes):>5.1f}% saved")
        on_disk_full = runs["cold cache"][2]
        on_disk_small = runs[f"warm, {args.dimensions}-dim"][2]
        print(
            f"\non disk ({args.store}, payload included): full {on_disk_full:,} bytes, "
            f"{small_dim}-dim {on_disk_small:,} bytes ({100 * (1 - on_disk_small / on_disk_full):.1f}% saved)"
        )
        print(f"embedding cache: {cache.nbytes:,} bytes of full vectors for {len(cache)} texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
