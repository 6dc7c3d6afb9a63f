#!/usr/bin/env python3
"""The main job at the engine's speed: ingest time / the engine's own ``embed_array`` time on the
same chunks, per sink (Milvus Lite, Qdrant local, qdrant-edge), and where the difference goes.

    python benchmarks/ingest_vs_embed.py [--docs 60] [--words 4000] [--rounds 3] [--batch-size 64]
                                         [--sinks milvus qdrant qdrant-edge] [--model FOLDER]

One process, one engine (all-MiniLM-L6-v2 from the test assets, as a user loads it), no embedding
cache. Each round runs, in a rotating order: ``embed`` (``engine.embed_array`` on exactly the texts
the ingest stores, as one call), and one :class:`~poolrag.ingest.IngestPipeline` run per sink into
a fresh collection (read, chunk, embed, write, checkpoint: what ``poolrag ingest --no-cache`` does
after loading the model). Ratios divide each ingest by the median of the embed passes of the same
run, so a noisy neighbour on this shared machine weighs on both sides. The stages are also timed
alone once: chunking the corpus, and writing the precomputed vectors to each sink in ingest-sized
batches (the cost the pipeline must hide behind the forward pass).
The corpus is ``ingest_vs_langchain.py``'s (deterministic ``--docs`` files of ``--words`` words).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, table
from ingest_vs_langchain import build_corpus

SINKS = ("milvus", "qdrant", "qdrant-edge")


def _location(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "milvus.db")} if kind == "milvus" else {"path": str(root / kind)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--words", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="the CLI's default chunks per step")
    parser.add_argument("--sinks", nargs="+", choices=SINKS, default=list(SINKS))
    parser.add_argument("--model", help="a model folder (default: the packaged all-MiniLM-L6-v2)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from poolrag import Engine
    from poolrag.cache import CachedEmbedder
    from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, default_model, read_paths
    from poolrag.stores import open_store
    from poolrag.stores.base import ChunkRecord

    engine = Engine(args.model or default_model())
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts)
    with tempfile.TemporaryDirectory(prefix="poolrag-ingest-vs-embed-") as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        corpus.mkdir()
        build_corpus(corpus, args.docs, args.words)
        docs = list(read_paths([corpus]))
        started = time.perf_counter()
        chunks = [c for d in docs for c in chunker.iter_chunks(d)]
        chunk_s = time.perf_counter() - started
        texts = [c.text for c in chunks]
        engine.embed_array(texts[:64])  # warm the engine's first-call paths for every contender

        def embed() -> None:
            engine.embed_array(texts)

        runs = 0

        def ingest(sink: str) -> None:
            nonlocal runs
            runs += 1
            where = root / f"run{runs}"
            where.mkdir()
            store = open_store(sink, "bench", **_location(sink, where))
            pipeline = IngestPipeline(
                store,
                DenseEncoder(CachedEmbedder(engine, None)),
                chunker,
                batch_size=args.batch_size,
                checkpoint_dir=where,
                progress=False,
            )
            report = pipeline.run(docs)
            store.close()
            assert report.upserted == len(chunks), (report.upserted, len(chunks))

        contenders = {"embed": embed, **{sink: (lambda s=sink: ingest(s)) for sink in args.sinks}}
        times: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                started = time.perf_counter()
                contenders[name]()
                times[name].append(time.perf_counter() - started)
            print(f"round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.2f}s" for n in names), flush=True)

        vectors = engine.embed_array(texts)
        write_s = {}
        for sink in args.sinks:
            where = root / f"write-{sink}"
            where.mkdir()
            store = open_store(sink, "bench", **_location(sink, where))
            spec = IngestPipeline(store, DenseEncoder(CachedEmbedder(engine, None)), chunker).spec
            store.ensure_collection(spec)
            records = [ChunkRecord(c.id, v, c.payload()) for c, v in zip(chunks, vectors, strict=True)]
            started = time.perf_counter()
            for i in range(0, len(records), args.batch_size):
                store.upsert(records[i : i + args.batch_size])
            write_s[sink] = time.perf_counter() - started
            store.close()

    embed_s = statistics.median(times["embed"])
    print(f"\n{machine()}")
    print(
        f"corpus: {len(docs)} documents -> {len(chunks)} chunks; "
        f"batch size {args.batch_size}; {args.rounds} rounds"
    )
    print(f"alone: chunking {chunk_s:.2f}s; embed_array {embed_s:.2f}s (median)")
    rows = [["embed_array (same chunks)", f"{embed_s:.2f}", "1.000", "-"]]
    for sink in args.sinks:
        median = statistics.median(times[sink])
        rows.append([f"ingest -> {sink}", f"{median:.2f}", f"{median / embed_s:.3f}", f"{write_s[sink]:.2f}"])
    print(table(["run", "median s", "x embed", "writes alone s"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
