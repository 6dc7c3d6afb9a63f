#!/usr/bin/env python3
"""The hybrid default against its legs and against ``poolrag eval --tune`` on the real sets.

    python benchmarks/real_datasets.py          # once: builds ~/.cache/poolrag/real-data
    python benchmarks/real_hybrid_default.py [--data DIR] [--sets ...] [--rerank]

Per set (word-piece BM25, the default analyzer): MRR@10 of dense, sparse, the default hybrid
(:data:`poolrag.stores.hybrid.DEFAULT_FUSION`, legs :func:`~poolrag.stores.hybrid.prefetch_depth`
deep) and its margin over the better leg; then the tuned setting's held-out MRR@10 from
:func:`poolrag.evaluation.tune.cross_validate` (5-fold CV over queries, legs as deep as
``poolrag eval --tune`` and the table's hybrid row fetch them: the chunks fused, at least 50), with
wins / ties / losses against dense and the permutation p-value. ``--rerank`` adds the second stage
(ms-marco-MiniLM-L-12-v2 test asset) over the default hybrid's candidates: the first stage, each
fused share and ``replace``. Legs come from :func:`real_hybrid.legs` (in-memory store, embeddings
cached beside the sets).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import cross_encoder_path, machine, minilm_path
from real_hybrid import DEFAULT_DATA, DEPTH, LANGUAGE_OF, RERANK_WEIGHTS, as_run, legs, mrr

from poolrag import Engine
from poolrag.cache import EmbeddingCache
from poolrag.evaluation import BeirDataset, evaluate
from poolrag.evaluation.tune import LegSource, QueryLegs, cross_validate
from poolrag.retrieval import CrossEncoderReranker
from poolrag.retrieval.fusion import SecondStage, descending_order, fuse_second_stage
from poolrag.sparse.language_detection import detect_language
from poolrag.stores.base import HybridFusion
from poolrag.stores.hybrid import DEFAULT_FUSION, fuse_legs, prefetch_depth
from poolrag.stores.language_prior import OUT_OF_LANGUAGE_FUSION, LanguageRecord


def measure(by_query, qrels, chunks: int) -> str:
    dense = mrr(as_run({q: d for q, (d, _) in by_query.items()}, chunks), qrels)
    sparse = mrr(as_run({q: s for q, (_, s) in by_query.items()}, chunks), qrels)
    depth = prefetch_depth(chunks, None)
    fused = {q: fuse_legs(d[:depth], s[:depth], chunks, DEFAULT_FUSION) for q, (d, s) in by_query.items()}
    hybrid = mrr(as_run(fused, chunks), qrels)
    tuned = cross_validate(
        {q: _leg_source(d, s) for q, (d, s) in by_query.items()},
        qrels,
        as_run({q: d for q, (d, _) in by_query.items()}, chunks),
        k=10,
        depth=chunks,
        chunks=DEPTH,  # the legs hold DEPTH chunks: a candidate's run widens no deeper
    )
    c = tuned.comparison
    return (
        f"dense {dense:.4f} | sparse {sparse:.4f} | "
        f"default {hybrid:.4f} ({hybrid - max(dense, sparse):+.4f}) "
        f"| tuned {tuned.held_out['mrr@10']:.4f} (dense {tuned.dense['mrr@10']:.4f}, "
        f"{c.wins}/{c.ties}/{c.losses}, p {c.p_value:.4f}, all queries: {tuned.record.fusion})"
    )


def _leg_source(dense: list, sparse: list) -> LegSource:
    """A query's legs, fetched once ``DEPTH`` deep, cut to each depth a candidate asks for."""
    return lambda depth: QueryLegs(dense[:depth], sparse[:depth])


def collection_fusion(dataset: BeirDataset) -> HybridFusion:
    """The default a plain ``ingest --hybrid`` of the set records: the language detected from its
    first 64 documents against MiniLM's card (``en``)."""
    texts = [doc.text for _, doc in zip(range(64), dataset.documents(), strict=False)]
    detected = detect_language(texts)
    record = LanguageRecord.declared(("en",), detected)
    return OUT_OF_LANGUAGE_FUSION if record.uncovered else DEFAULT_FUSION


def second_stage(
    by_query,
    qrels,
    chunks: int,
    queries: dict[str, str],
    reranker,
    fusion: HybridFusion = DEFAULT_FUSION,
    shares: tuple[float, ...] = RERANK_WEIGHTS,
) -> str:
    """MRR@10 / nDCG@10 of the first stage, the reranker fused at each share, and ``replace``
    (the reranker scores each query's candidates once; the shares only re-mix them)."""
    depth = prefetch_depth(chunks, None)
    first = {q: fuse_legs(d[:depth], s[:depth], chunks, fusion) for q, (d, s) in by_query.items()}
    scored = {q: reranker.scores(queries[q], [h.payload["text"] for h in hits]) for q, hits in first.items()}
    row = {"first stage": metrics_at_10(as_run(first, chunks), qrels)}
    for mode, weights in ((SecondStage.FUSE, shares), (SecondStage.REPLACE, (1.0,))):
        for weight in weights:
            reranked = {}
            for q, hits in first.items():
                final = fuse_second_stage(scored[q], [h.score for h in hits], mode, weight)
                reranked[q] = [
                    type(hits[i])(hits[i].id, float(final[i]), hits[i].payload)
                    for i in descending_order(final)
                ]
            name = f"{mode.value} {weight:g}" if mode is SecondStage.FUSE else mode.value
            row[name] = metrics_at_10(as_run(reranked, chunks), qrels)
    return " | ".join(f"{k} {m:.4f}/{n:.4f}" for k, (m, n) in row.items())


def metrics_at_10(run, qrels) -> tuple[float, float]:
    scores = evaluate(run, {q: qrels[q] for q in run}, (10,), ("mrr", "ndcg"))
    return scores["mrr@10"], scores["ndcg@10"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--sets", default="debian-faq-en,perlfaq,debian-faq-de,debian-faq-fr,chatterbot-english"
    )
    parser.add_argument("--rerank", action="store_true", help="also measure the second stage")
    parser.add_argument(
        "--rerank-only",
        action="store_true",
        help="only the second stage, over the default each set's detected language gives",
    )
    parser.add_argument(
        "--shares",
        default=",".join(f"{w:g}" for w in RERANK_WEIGHTS),
        help="the reranker's shares to fuse at (comma-separated)",
    )
    args = parser.parse_args()
    print(f"<!-- {machine()}; default {DEFAULT_FUSION} -->")
    engine = Engine(minilm_path())
    cache = EmbeddingCache(args.data / "cache.sqlite")
    rerank = args.rerank or args.rerank_only
    reranker = CrossEncoderReranker(Engine(cross_encoder_path())) if rerank else None
    for name in args.sets.split(","):
        dataset = BeirDataset(args.data / name)
        by_query, qrels, chunks = legs(engine, cache, dataset, "wordpiece", LANGUAGE_OF.get(name, "english"))
        if not args.rerank_only:
            print(f"{name}: {measure(by_query, qrels, chunks)}", flush=True)
        if reranker is not None:
            queries = {q.id: q.text for q in dataset.queries()}
            fusion = collection_fusion(dataset) if args.rerank_only else DEFAULT_FUSION
            shares = tuple(float(w) for w in args.shares.split(","))
            row = second_stage(by_query, qrels, chunks, queries, reranker, fusion, shares)
            print(f"{name} rerank over {fusion}: {row}", flush=True)


if __name__ == "__main__":
    main()
