#!/usr/bin/env python3
"""What each retrieval mode buys: ``poolrag eval``'s table on benchmarks/hybrid_dataset.py, per store.

    python benchmarks/hybrid_eval.py [--seed 0] [--split-seed 0] [--stores milvus,qdrant] [--no-rerank]

Builds the seeded BEIR-layout set (300 documents, 60 queries: 30 whose answer hinges on a rare
term, 30 paraphrases with lexical decoys), then runs the eval driver ``poolrag eval`` uses
(:class:`poolrag.evaluation.run.Evaluation`, in process so the per-kind split can be read off its
runs) on Milvus Lite and Qdrant local mode with the packaged all-MiniLM-L6-v2, and reranks with the
converted ms-marco-MiniLM-L-12-v2 *test asset* (real weights, from ``poolrag_test_assets``) when it
is available. Each store is evaluated twice; the second run must embed nothing. Prints a Markdown
table: metrics @10 for all queries, and MRR@10 on each kind of query.

Then it compares the hybrid fusion rules (:mod:`poolrag.stores.hybrid`) on the same collections
without tuning on the reported queries: a seeded hash splits the queries in two halves, the rule
with the best MRR@10 on the *selection* half is named, and every rule is reported on the other
half and on all queries (the library's default was chosen this way, with ``--split-seed 0``).
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

from common import cross_encoder_path, machine, minilm_path
from hybrid_dataset import write

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.evaluation import BeirDataset, evaluate
from poolrag.evaluation.run import RERANK_MODES, EvalReport, Evaluation, documents_of
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.sparse_encoders import bm25_for_model
from poolrag.retrieval import Retriever
from poolrag.stores import open_store
from poolrag.stores.hybrid import DEFAULT_FUSION

K = 10
#: The rules compared: rank fusion (plain and leg-weighted), Qdrant's DBSF, min-max score mixes.
FUSIONS = [
    "rrf",
    ("weighted", 0.3),
    ("weighted", 0.7),
    "dbsf",
    *(("minmax", w) for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)),
]


def _label(fusion) -> str:
    return fusion if isinstance(fusion, str) else f"{fusion[0]} {fusion[1]:g}"


def _split(query_id: str, seed: int) -> str:
    """A query's half: ``select`` (to choose a rule on) or ``report`` (to report on), by a seeded hash."""
    digest = hashlib.sha256(f"{seed}:{query_id}".encode()).digest()
    return "select" if digest[-1] % 2 == 0 else "report"


def _fusion_runs(retriever: Retriever, dataset: BeirDataset, prefetch) -> dict[str, dict]:
    """Every rule's run, retrieved as ``poolrag eval`` retrieves its hybrid mode."""
    queries = [q for q in dataset.queries() if q.id in dataset.qrels()]
    return {
        _label(fusion): {
            q.id: documents_of(
                retriever.search(q.text, K, mode="hybrid", fusion=fusion, prefetch=prefetch, candidates=K)
            )
            for q in queries
        }
        for fusion in FUSIONS
    }


def eval_modes(rerank: bool) -> list[str]:
    """The table's modes: the first stage, and the reranked ones when a reranker loads. Not
    ``saved``: a fresh collection holds no tuned setting, and ``Evaluation.run`` refuses that mode."""
    return ["dense", "sparse", "hybrid", *(RERANK_MODES if rerank else ())]


def _evaluate(
    kind: str, root: Path, dataset: BeirDataset, engine: Engine, reranker, modes, prefetch, sweep=False
):
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
        elapsed = time.perf_counter() - started
        fusions = None
        if sweep:
            fusions = _fusion_runs(Retriever(store, embedder, sparse_encoder=sparse), dataset, prefetch)
        return report, elapsed, fusions
    finally:
        store.close()


def _by_kind(report: EvalReport, dataset: BeirDataset, mode: str) -> dict[str, float]:
    return _mrr_by_group(report.runs[mode], dataset, lambda q: str(q.metadata.get("kind", "all")))


def _mrr_by_group(run: dict, dataset: BeirDataset, group) -> dict[str, float]:
    qrels = dataset.qrels()
    groups: dict[str, list[str]] = {}
    for query in dataset.queries():
        groups.setdefault(group(query), []).append(query.id)
    out = {}
    for name, ids in sorted(groups.items()):
        part = {q: run[q] for q in ids if q in run}
        out[name] = evaluate(part, {q: qrels[q] for q in ids if q in qrels}, (K,))[f"mrr@{K}"]
    return out


def _fusion_table(sweeps: dict[str, dict], dataset: BeirDataset, seed: int) -> None:
    """MRR@10 of each rule per store: on the selection half, the report half, all, and each kind."""
    qrels = dataset.qrels()
    print()
    header = ["store", "fusion", "select half", "report half", "all", "paraphrase", "rare-term"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for kind, runs in sweeps.items():
        rows = {}
        for label, run in runs.items():
            halves = _mrr_by_group(run, dataset, lambda q: _split(q.id, seed))
            kinds = _mrr_by_group(run, dataset, lambda q: str(q.metadata.get("kind", "all")))
            overall = evaluate(run, qrels, (K,))[f"mrr@{K}"]
            rows[label] = [halves["select"], halves["report"], overall, *(kinds[k] for k in sorted(kinds))]
        chosen = max(rows, key=lambda label: rows[label][0])
        for label, cells in rows.items():
            mark = " (chosen on the selection half)" if label == chosen else ""
            mark += " (default)" if label == _label(DEFAULT_FUSION) else ""
            print(f"| {kind} | {label}{mark} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    halves = [_split(q.id, seed) for q in dataset.queries() if q.id in qrels]
    print(f"<!-- split seed {seed}: {halves.count('select')} selection, {halves.count('report')} report -->")


def _cells(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.3f}" for name, value in values.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stores", default="milvus,qdrant")
    parser.add_argument("--no-rerank", action="store_true", help="leave out the reranked modes")
    parser.add_argument("--prefetch", type=int, help="depth of each hybrid leg (default: the retriever's)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the selection/report split")
    args = parser.parse_args()

    print(f"<!-- {machine()} -->")
    engine = Engine(minilm_path())
    reranker = None
    if not args.no_rerank:
        try:
            reranker = Engine(cross_encoder_path())
        except Exception as exc:  # the asset cannot be built here: measure the first stage only
            print(f"<!-- no reranker ({exc}); reranked modes left out -->")
    modes = eval_modes(reranker is not None)
    with tempfile.TemporaryDirectory(prefix="hybrid-eval-") as tmp:
        root = Path(tmp)
        write(root / "dataset", args.seed)
        dataset = BeirDataset(root / "dataset")
        kinds = None
        rows = []
        sweeps = {}
        for kind in args.stores.split(","):
            report, first, sweeps[kind] = _evaluate(
                kind, root, dataset, engine, reranker, modes, args.prefetch, sweep=True
            )
            again, second, _ = _evaluate(kind, root, dataset, engine, reranker, modes, args.prefetch)
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
        per_kind = [f"MRR@{K} {k}" for k in kinds or []]
        header = ["store", "mode", f"recall@{K}", f"MRR@{K}", f"nDCG@{K}", *per_kind]
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for kind, mode, values, split in rows:
            cells = [values[f"recall@{K}"], values[f"mrr@{K}"], values[f"ndcg@{K}"], *split.values()]
            print(f"| {kind} | {mode} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
        _fusion_table(sweeps, dataset, args.split_seed)


if __name__ == "__main__":
    main()
