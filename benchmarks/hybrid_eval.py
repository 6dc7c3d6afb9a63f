#!/usr/bin/env python3
"""What each retrieval mode buys: ``poolrag eval``'s table on benchmarks/hybrid_dataset.py, per store.

    python benchmarks/hybrid_eval.py [--seed 0] [--stores milvus,qdrant] [--no-rerank]

Builds the seeded BEIR-layout set (300 documents, 60 queries: 30 whose answer hinges on a rare
term, 30 paraphrases with lexical decoys), then runs the eval driver ``poolrag eval`` uses
(:class:`poolrag.evaluation.run.Evaluation`, in process so the per-kind split can be read off its
runs) on Milvus Lite and Qdrant local mode with the packaged all-MiniLM-L6-v2, and reranks with the
converted ms-marco-MiniLM-L-12-v2 *test asset* (real weights, from ``poolrag_test_assets``) when it
is available. Each store is evaluated twice; the second run must embed nothing. Prints a Markdown
table: metrics @10 for all queries, and MRR@10 on each kind of query.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import cross_encoder_path, machine, minilm_path
from hybrid_dataset import write

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.evaluation import BeirDataset, evaluate
from poolrag.evaluation.run import EVAL_MODES, EvalReport, Evaluation
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.sparse_encoders import bm25_for_model
from poolrag.stores import open_store

K = 10


def _evaluate(kind: str, root: Path, dataset: BeirDataset, engine: Engine, reranker, modes, prefetch):
    where = {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}
    store = open_store(kind, "hybrid_eval", **where)
    try:
        cache = EmbeddingCache(root / f"{kind}-cache.sqlite")
        embedder = CachedEmbedder(engine, cache)
        sparse = bm25_for_model(engine.tokenizer, engine.facts.model_identity, cache)
        pipeline = IngestPipeline(
            store,
            DenseEncoder(embedder),
            TokenChunker.for_model(engine.tokenizer, engine.facts),
            checkpoint_dir=root / "ck",
            progress=False,
            sparse_encoder=sparse,
        )
        evaluation = Evaluation(pipeline, embedder, sparse_encoder=sparse, reranker=reranker)
        started = time.perf_counter()
        report = evaluation.run(dataset, modes, k=K, prefetch=prefetch)
        return report, time.perf_counter() - started
    finally:
        store.close()


def _by_kind(report: EvalReport, dataset: BeirDataset, mode: str) -> dict[str, float]:
    qrels = dataset.qrels()
    kinds: dict[str, list[str]] = {}
    for query in dataset.queries():
        kinds.setdefault(str(query.metadata.get("kind", "all")), []).append(query.id)
    out = {}
    for kind, ids in sorted(kinds.items()):
        run = {q: report.runs[mode][q] for q in ids if q in report.runs[mode]}
        out[kind] = evaluate(run, {q: qrels[q] for q in ids if q in qrels}, (K,))[f"mrr@{K}"]
    return out


def _cells(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.3f}" for name, value in values.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stores", default="milvus,qdrant")
    parser.add_argument("--no-rerank", action="store_true", help="leave out the reranked modes")
    parser.add_argument("--prefetch", type=int, help="depth of each hybrid leg (default: the retriever's)")
    args = parser.parse_args()

    print(f"<!-- {machine()} -->")
    engine = Engine(minilm_path())
    reranker = None
    if not args.no_rerank:
        try:
            reranker = Engine(cross_encoder_path())
        except Exception as exc:  # the asset cannot be built here: measure the first stage only
            print(f"<!-- no reranker ({exc}); reranked modes left out -->")
    modes = list(EVAL_MODES if reranker is not None else EVAL_MODES[:3])
    with tempfile.TemporaryDirectory(prefix="hybrid-eval-") as tmp:
        root = Path(tmp)
        write(root / "dataset", args.seed)
        dataset = BeirDataset(root / "dataset")
        kinds = None
        rows = []
        for kind in args.stores.split(","):
            report, first = _evaluate(kind, root, dataset, engine, reranker, modes, args.prefetch)
            again, second = _evaluate(kind, root, dataset, engine, reranker, modes, args.prefetch)
            assert again.ingest.embedded == 0 and again.ingest.sparse_computed == 0, "re-run embedded"
            for mode in modes:
                if again.metrics[mode] != report.metrics[mode]:
                    print(f"<!-- {kind} {mode} on the re-run: {_cells(again.metrics[mode])} -->")
            print(
                f"<!-- {kind}: {report.ingest.documents} documents, {report.ingest.chunks} chunks, "
                f"{report.queries} queries; first run {first:.1f}s, second {second:.1f}s "
                f"({again.ingest.embedded} embedded, {again.queries_embedded} queries embedded) -->"
            )
            for mode in modes:
                split = _by_kind(report, dataset, mode)
                kinds = kinds or list(split)
                rows.append((kind, mode, report.metrics[mode], split))
    header = ["store", "mode", f"recall@{K}", f"MRR@{K}", f"nDCG@{K}", *(f"MRR@{K} {k}" for k in kinds or [])]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for kind, mode, values, split in rows:
        cells = [values[f"recall@{K}"], values[f"mrr@{K}"], values[f"ndcg@{K}"], *split.values()]
        print(f"| {kind} | {mode} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")


if __name__ == "__main__":
    main()
