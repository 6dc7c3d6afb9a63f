#!/usr/bin/env python3
"""The hybrid default with the collection's language declared, on the nine real sets, and how its
BM25 share was chosen (leave one set out).

    python benchmarks/real_datasets.py          # once: builds ~/.cache/poolrag/real-data
    python benchmarks/real_hybrid_language.py [--model DIR] [--model-languages en] [--sets ...]

Per set (word-piece BM25, legs from :func:`real_hybrid.legs`, in-memory store, cached embeddings):
MRR@10 of dense, sparse, the default without a declared language
(:data:`~poolrag.stores.hybrid.DEFAULT_FUSION`), and the default a collection declared in the set's
language gets (:func:`~poolrag.stores.language_prior.collection_default_fusion` over a BM25 record
holding the model card's languages and the set's), with its margin over the better leg. Then, over
the sets the model does not cover, every ``("minmax", w)`` share: the share each set would get if it
were left out (best worst margin on the others, then the best mean), and that set's margin under it.
``--model-languages`` stands in for a card that declares none (the bge-small-en test asset's).
Also prints the dense leg's per-query score level and spread (median over queries), the per-query
signal that was measured and not adopted (it is the model's calibration, not the language's).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from common import machine, minilm_path
from real_hybrid import DEFAULT_DATA, as_run, legs, mrr

from poolrag import Engine
from poolrag.cache import EmbeddingCache
from poolrag.config.model_card import declared_languages
from poolrag.evaluation import BeirDataset
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores.base import CollectionSpec
from poolrag.stores.hybrid import DEFAULT_FUSION, fuse_legs, prefetch_depth
from poolrag.stores.language_prior import LANGUAGES_RECORD_KEY, LanguageRecord, collection_default_fusion

LANGUAGE_OF = {
    "debian-faq-en": "english",
    "perlfaq": "english",
    "chatterbot-english": "english",
    "debian-faq-de": "german",
    "debian-faq-fr": "french",
    "chatterbot-italian": "italian",
    "chatterbot-dutch": "dutch",
    "chatterbot-spanish": "spanish",
    "chatterbot-portuguese": "portuguese",
}
SHARES = [round(0.5 + 0.05 * i, 2) for i in range(11)]


def fused_mrr(by_query, qrels, chunks: int, fusion) -> float:
    depth = prefetch_depth(chunks, None)
    fused = {q: fuse_legs(d[:depth], s[:depth], chunks, fusion) for q, (d, s) in by_query.items()}
    return mrr(as_run(fused, chunks), qrels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=None, help="default: the packaged all-MiniLM-L6-v2")
    parser.add_argument("--model-languages", default=None, help="comma-separated codes, if the card has none")
    parser.add_argument("--sets", default=",".join(LANGUAGE_OF))
    args = parser.parse_args()
    folder = args.model or minilm_path()
    model_languages = (
        tuple(args.model_languages.split(",")) if args.model_languages else declared_languages(folder)
    )
    print(f"<!-- {machine()}; model {folder.name}, languages {model_languages}; default {DEFAULT_FUSION} -->")
    engine = Engine(folder)
    cache = EmbeddingCache(args.data / "cache.sqlite")
    rows, margins = {}, {}
    for name in args.sets.split(","):
        by_query, qrels, chunks = legs(engine, cache, BeirDataset(args.data / name), "wordpiece", "english")
        dense = mrr(as_run({q: d for q, (d, _) in by_query.items()}, chunks), qrels)
        sparse = mrr(as_run({q: s for q, (_, s) in by_query.items()}, chunks), qrels)
        record = LanguageRecord.declared(model_languages, LANGUAGE_OF[name])
        options = {BM25_RECORD_KEY: {LANGUAGES_RECORD_KEY: record.to_metadata()}}
        fusion = collection_default_fusion(CollectionSpec(name, 1, "m", 1, model_options=options))
        best = max(dense, sparse)
        old, new = (
            fused_mrr(by_query, qrels, chunks, DEFAULT_FUSION),
            fused_mrr(by_query, qrels, chunks, fusion),
        )
        level = statistics.median(statistics.fmean(h.score for h in d[:50]) for d, _ in by_query.values())
        spread = statistics.median(statistics.pstdev(h.score for h in d[:50]) for d, _ in by_query.values())
        rows[name] = (dense, sparse, old, new, new - best, fusion, record.uncovered, level, spread)
        if record.uncovered:
            margins[name] = {w: fused_mrr(by_query, qrels, chunks, ("minmax", w)) - best for w in SHARES}
        print(f"{name}: done", flush=True)
    print(
        "\n| set | dense | sparse | default, no language | **default, language declared** "
        "| margin over better leg | fusion used | dense level / spread |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (dense, sparse, old, new, margin, fusion, _, level, spread) in rows.items():
        print(
            f"| {name} | {dense:.3f} | {sparse:.3f} | {old:.3f} | **{new:.3f}** | {margin:+.4f} | {fusion} "
            f"| {level:.2f} / {spread:.3f} |"
        )
    if not margins:
        return
    print("\n| share | " + " | ".join(margins) + " | worst |")
    print("|---|" + "---|" * (len(margins) + 1))
    for w in SHARES:
        cells = [margins[n][w] for n in margins]
        print(f"| {w:g} | " + " | ".join(f"{c:+.4f}" for c in cells) + f" | {min(cells):+.4f} |")
    print("\nLeave one set out (share chosen on the others; that set's margin under it):")
    for held in margins:
        rest = [n for n in margins if n != held]

        def rank(w: float, rest: list[str] = rest) -> tuple[float, float]:
            return (min(margins[n][w] for n in rest), sum(margins[n][w] for n in rest))

        chosen = max(SHARES, key=rank)
        print(f"- {held}: chosen {chosen:g}, held-out margin {margins[held][chosen]:+.4f}")


if __name__ == "__main__":
    main()
