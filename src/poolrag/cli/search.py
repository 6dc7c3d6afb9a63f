"""``poolrag search "query"``: the Matryoshka funnel (or ColBERT MaxSim) over an ingested collection,
optionally reranked by a cross-encoder."""

from __future__ import annotations

import argparse
import json
from typing import Any

from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_extra
from poolrag.cli.ingest import (
    _positive_int,
    add_cache_arguments,
    add_store_arguments,
    load_engine,
    open_cache_from_args,
    open_store_from_args,
    report_error,
    setup_logging,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search an ingested collection (small-vector recall, full-vector re-score, optional rerank)",
        description=(
            "Search a collection filled by 'poolrag ingest'. The model defaults to the one recorded in the "
            "collection; candidates recalled with the stored (possibly Matryoshka-truncated) vectors are "
            "re-scored with full vectors from the cache, then optionally reranked by a cross-encoder."
        ),
    )
    parser.add_argument("query", help="the question or search text")
    add_store_arguments(parser)
    parser.add_argument("--model", help="query model (default: the model the collection was ingested with)")
    parser.add_argument("--rerank", metavar="MODEL", help="cross-encoder to rerank the candidates with")
    parser.add_argument("-k", type=_positive_int, default=10, help="results to show (default 10)")
    parser.add_argument("--candidates", type=_positive_int, help="stage-1 candidates (default max(10k, 50))")
    parser.add_argument("--no-rescore", action="store_true", help="skip the full-vector re-scoring stage")
    add_cache_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print results as JSON lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not require_extra("search", args.store):
        return EXIT_MISSING_EXTRA
    from poolrag.errors import PoolragError

    setup_logging(args.verbose)
    store = None
    try:
        store = open_store_from_args(args)
        results = _search(store, args)
    except PoolragError as exc:
        return report_error("search", exc)
    finally:
        if store is not None:
            store.close()
    for rank, r in enumerate(results, start=1):
        if args.json:
            print(
                json.dumps(
                    {
                        "rank": rank,
                        "id": r.id,
                        "score": r.score,
                        "source": r.source,
                        "start": r.start,
                        "end": r.end,
                        "stages": r.stage_scores,
                        "text": r.text,
                    }
                )
            )
        else:
            snippet = " ".join(r.text.split())
            snippet = snippet if len(snippet) <= 160 else snippet[:157] + "..."
            print(f"{rank:>2}. {r.score:.4f}  {r.source} [{r.start}:{r.end}]\n    {snippet}")
    return 0


def _search(store: Any, args: argparse.Namespace) -> list[Any]:
    from poolrag.cache import CachedEmbedder
    from poolrag.ingest import default_model
    from poolrag.retrieval import ColbertRetriever, Retriever
    from poolrag.stores import CollectionNotFoundError

    spec = store.read_spec()
    if spec is None:
        raise CollectionNotFoundError(
            f"collection {args.collection!r} does not exist in {args.store} at {store.location}; "
            "run 'poolrag ingest' first (with the same --store/--uri/--path/--collection)"
        )
    engine = load_engine(
        args.model or _recorded_model(spec.model_name) or default_model(), spec.model_options
    )
    reranker = load_engine(args.rerank) if args.rerank else None
    if spec.layout == "multivector":
        return ColbertRetriever(store, engine, reranker=reranker).search(
            args.query, args.k, candidates=args.candidates
        )
    retriever = Retriever(store, CachedEmbedder(engine, open_cache_from_args(args)), reranker=reranker)
    return retriever.search(args.query, args.k, candidates=args.candidates, rescore=not args.no_rescore)


def _recorded_model(name: str) -> str | None:
    """The model the collection was filled with, unless it was a local folder that is not here (a
    collection copied from another machine): then the default model is tried, and the weights
    fingerprint check decides whether it is the same model."""
    from pathlib import Path

    if not name:
        return None
    looks_local = name.startswith(("/", ".", "~")) or "\\" in name
    return name if not looks_local or Path(name).expanduser().exists() else None
