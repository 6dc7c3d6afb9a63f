"""``poolrag search "query"``: the Matryoshka funnel (or ColBERT MaxSim) over an ingested collection,
optionally reranked by a cross-encoder whose scores are fused with the first stage's by default."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolrag.cli.command_errors import report_error, setup_logging, user_errors
from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_store_extra
from poolrag.cli.model_loading import engine_args_from, load_engine, load_sparse_model
from poolrag.cli.store_options import (
    add_cache_arguments,
    add_store_arguments,
    open_cache_from_args,
    refuse_missing_database,
    store_address_from_args,
)
from poolrag.config.option_choices import TUNE_ENV
from poolrag.engine_args import EngineArgs, positive_int, unit_interval
from poolrag.errors import InputTooLongError, InvalidInputError
from poolrag.printable import printable

if TYPE_CHECKING:
    from poolrag.engine import Engine
    from poolrag.retrieval import CrossEncoderReranker, SearchResult
    from poolrag.retrieval.sparse_queries import SparseQueryEncoder
    from poolrag.stores.base import CollectionSpec, VectorStore
    from poolrag.stores.retrieval_record import RetrievalRecord

logger = logging.getLogger(__name__)

#: poolrag.retrieval.fusion.SecondStage's values, spelled out so that ``--help`` does not import the
#: retrieval stack (torch, the stores); a test keeps the two equal.
SECOND_STAGES = ("fuse", "rrf", "replace")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search an ingested collection (small-vector recall, full-vector re-score, optional rerank)",
        description=(
            "Search a collection filled by 'poolrag ingest' with the same --model (the default model "
            "unless you name one; the collection's record of its model must match). Candidates "
            "recalled with the stored (possibly Matryoshka-truncated) vectors are re-scored with full "
            "vectors from the cache, then optionally reranked by a cross-encoder (by default its scores "
            "are fused with the first stage's, so a reranker outside its domain cannot undo a good "
            "first stage; --second-stage replace ranks by the reranker alone)."
        ),
    )
    parser.add_argument("query", help="the question or search text")
    add_store_arguments(parser)
    parser.add_argument(
        "--model", help="query model: the one the collection was ingested with (default: all-MiniLM-L6-v2)"
    )
    EngineArgs.add_engine_flags(parser)  # the query model's; --rerank and --sparse-model run the same way
    parser.add_argument("--rerank", metavar="MODEL", help="cross-encoder to rerank the candidates with")
    parser.add_argument(
        "--second-stage",
        choices=SECOND_STAGES,
        help="with --rerank: fuse (default) mixes per-query z-scores of the first stage and the reranker, "
        "rrf fuses their ranks, replace keeps the reranker's order alone",
    )
    parser.add_argument(
        "--rerank-weight",
        type=unit_interval,
        metavar="W",
        help="with --rerank: the reranker's share of the fused score, 0..1 (default: the share a saved "
        "'poolrag eval --tune --rerank --save' chose, else 0.5, or 0.2 where the reranker's model card "
        "does not declare the collection's recorded language)",
    )
    parser.add_argument(
        "--mode",
        choices=("dense", "sparse", "hybrid"),
        default="dense",
        help="dense vectors (default), the BM25 sparse field alone, or both fused (collections "
        "ingested with --hybrid)",
    )
    parser.add_argument("--hybrid", dest="mode", action="store_const", const="hybrid", help="--mode hybrid")
    parser.add_argument(
        "--sparse-model",
        metavar="MODEL",
        help="sparse/hybrid on a collection ingested with --sparse-model: the same model (checked)",
    )
    parser.add_argument("-k", type=positive_int, default=10, help="results to show (default 10)")
    parser.add_argument(
        "--candidates",
        type=positive_int,
        help="stage-1 candidates (default max(10k, 50) when a later stage follows: --rerank, or the "
        "full-vector re-scoring of a Matryoshka-truncated collection; else k)",
    )
    parser.add_argument("--no-rescore", action="store_true", help="skip the full-vector re-scoring stage")
    parser.add_argument(
        "--prefetch",
        type=positive_int,
        help="with --mode hybrid: depth of each leg (default: the chunks fused, at least 50, or the "
        "depth a saved 'poolrag eval --tune --save' chose)",
    )
    add_cache_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print results as JSON lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines (a first load's measuring of the model)"
    )
    parser.set_defaults(handler=run)


def _no_results(args: argparse.Namespace, chunks: int) -> str:
    """Why a search found nothing: an empty collection, or (sparse) no chunk holding a query term,
    which BM25 and learned sparse vectors cannot rank."""
    where = f"collection {args.collection!r}"
    if not chunks:
        return f"no results: {where} is empty"
    if args.mode == "sparse":
        return (
            f"no results: none of the {chunks} chunks in {where} holds a term of the query (a sparse "
            "search finds only chunks sharing one); search it with the dense or hybrid mode"
        )
    return f"no results in {where} ({chunks} chunks)"


def run(args: argparse.Namespace) -> int:
    if not require_store_extra("search", args.store):
        return EXIT_MISSING_EXTRA
    setup_logging(args.verbose, quiet=args.quiet)
    if args.rerank is None and (args.second_stage is not None or args.rerank_weight is not None):
        return report_error("search", ValueError("--second-stage and --rerank-weight need --rerank MODEL"))
    if args.prefetch is not None and args.mode != "hybrid":
        refused = ValueError("--prefetch sets the depth of a hybrid search's legs: add --hybrid")
        return report_error("search", refused)
    if args.sparse_model is not None and args.mode == "dense":
        refused = ValueError("--sparse-model is the sparse leg's model: add --mode sparse or --hybrid")
        return report_error("search", refused)
    # one query: a first load's measuring would slow it and end unsaved (a fast mode asked to be
    # chosen is measured: that is what was asked)
    if args.autotune is None and not os.environ.get(TUNE_ENV) and args.cpu_fast_mode != "auto":
        args.autotune = "cached"
    store = None
    try:
        refuse_missing_database(args)
        store = store_address_from_args(args).open()
        results = _search(store, args)
        if not results:  # said on stderr: --json's stdout stays a list of result lines (none)
            print(_no_results(args, store.count()), file=sys.stderr)
    except InputTooLongError as exc:  # the engine's advice names a Python argument; this is a command
        said = InvalidInputError(
            f"the query has {exc.num_tokens} tokens, more than the model's maximum of {exc.max_len}; "
            "shorten it, or drop --no-auto-truncate to search with its first tokens"
        )
        return report_error("search", said)
    except user_errors() as exc:
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
                        "metadata": r.metadata,  # the record's own fields: url, title, ...
                    }
                    | {key: r.payload[key] for key in ("page", "last_page", "modality") if key in r.payload}
                )
            )
        else:
            snippet = " ".join(r.text.split())
            snippet = printable(snippet if len(snippet) <= 160 else snippet[:157] + "...")
            heading = f"{rank:>2}. {r.score:.4f}  {printable(r.source)} {_where(r)}".rstrip()
            print(f"{heading}\n    {snippet}".rstrip())
    return 0


def _where(result: SearchResult) -> str:
    """Where a hit is in its source: a PDF's page or a deck's slide (both stored as ``page``, a
    deck's named as PowerPoint numbers it), an image (the whole file), else character offsets and
    the headings of a Markdown or reStructuredText section (none for a point without offsets)."""
    from poolrag.ingest.readers import PPTX_SUFFIXES

    if "page" in result.payload:
        unit = "slide" if Path(result.source).suffix.lower() in PPTX_SUFFIXES else "page"
        if "last_page" in result.payload:
            return f"{unit}s {result.payload['page']}-{result.payload['last_page']}"
        return f"{unit} {result.payload['page']}"
    if result.payload.get("modality") == "image":
        return "(image)"
    headings = result.payload.get("headings")
    section = (
        f" {printable(' > '.join(map(str, headings)))}" if isinstance(headings, list) and headings else ""
    )
    if result.start is None or result.end is None:  # a point another writer (a framework) added
        return section.lstrip()
    return f"[{result.start}:{result.end}]{section}"


def _log_fusion(saved: RetrievalRecord | None, spec: CollectionSpec) -> None:
    """Which fusion a hybrid search uses (``-v``): the one ``eval --tune --save`` recorded in the
    collection, else the collection's default, so a user can tell whether a tuning took."""
    from poolrag.stores.hybrid import fusion_text
    from poolrag.stores.language_prior import collection_default_fusion

    if saved is None:
        fusion = fusion_text(collection_default_fusion(spec))
        logger.info("hybrid: fused by %s, the collection's default (no 'poolrag eval --tune --save')", fusion)
    else:
        logger.info(
            "hybrid: fused by %s with legs %d deep, the setting 'poolrag eval --tune --save' recorded",
            fusion_text(saved.fusion),
            saved.prefetch,
        )


def _search(store: VectorStore, args: argparse.Namespace) -> list[SearchResult]:
    from poolrag import PoolingParams
    from poolrag.cache import CachedEmbedder
    from poolrag.config.packaged_models import packaged_hub_id
    from poolrag.retrieval import ColbertRetriever, Retriever
    from poolrag.retrieval.collection_checks import check_model, existing_spec

    spec = existing_spec(
        store, "run 'poolrag ingest' first (with the same --store/--uri/--path/--collection)"
    )
    # The model is the one the user names (or the default), loaded with the user's own options:
    # what the collection recorded is data and only decides whether the answer is "yes, same model".
    engine_args = engine_args_from(args, matryoshka=_recorded_matryoshka(spec.model_options))
    engine = load_engine(engine_args)
    where = f"{store.name} at {store.location}"
    model = packaged_hub_id(spec.model_name) or spec.model_name  # not another machine's venv path
    check_model(spec, engine.facts, where, f"search it with --model {shlex.quote(model)}")
    reranker = _reranker(args, engine_args)
    if spec.layout == "multivector":
        if args.mode != "dense":
            raise InvalidInputError(
                f"--mode {args.mode}: a collection of token vectors (ColBERT, ColPali) has no sparse field"
            )
        return ColbertRetriever(store, engine, reranker=reranker).search(
            args.query, args.k, candidates=args.candidates
        )
    sparse = _sparse_queries(spec, engine, args, engine_args) if args.mode != "dense" else None
    # --no-auto-truncate said explicitly, so the cache keys a refusal apart: a vector an earlier,
    # truncating search cached for the same long query must not answer for it
    refusing = PoolingParams(truncate=False) if not engine_args.truncate else None
    embedder = CachedEmbedder(engine, open_cache_from_args(args), pooling_params=refusing)
    retriever = Retriever(store, embedder, reranker=reranker, sparse_encoder=sparse)
    if args.mode == "hybrid":
        _log_fusion(retriever.saved, spec)
    return retriever.search(
        args.query,
        args.k,
        mode=args.mode,
        candidates=args.candidates,
        rescore=not args.no_rescore,
        prefetch=args.prefetch,
    )


def _sparse_queries(
    spec: CollectionSpec, engine: Engine, args: argparse.Namespace, engine_args: EngineArgs
) -> SparseQueryEncoder:
    """BM25's unit query weights (every store multiplies them by IDF), its terms split by the analyzer
    the collection recorded, or for a ``learned`` collection the model that made its vectors:
    --sparse-model, else the main model's own sparse head."""
    from poolrag.ingest.sparse_encoders import LEARNED_SPARSE_OPTIONS_KEY, learned_sparse_for_search
    from poolrag.sparse.bm25 import BM25_RECORD_KEY, query_encoder_for_record

    if spec.sparse != "learned":
        return query_encoder_for_record(spec.model_options.get(BM25_RECORD_KEY), engine.tokenizer)
    named = load_sparse_model(engine_args.sibling(args.sparse_model)) if args.sparse_model else None
    return learned_sparse_for_search(spec.model_options.get(LEARNED_SPARSE_OPTIONS_KEY), engine, named)


def _reranker(args: argparse.Namespace, engine_args: EngineArgs) -> CrossEncoderReranker | Engine | None:
    if not args.rerank:
        return None
    from poolrag.retrieval import CrossEncoderReranker

    engine = load_engine(engine_args.sibling(args.rerank))
    if args.second_stage is None and args.rerank_weight is None:
        return engine  # bare: the retriever gives it the share a saved --tune chose, else the default
    # an unset weight is the retriever's to pick, as for a bare model (a saved --tune, the languages)
    return CrossEncoderReranker(engine, second_stage=args.second_stage or "fuse", weight=args.rerank_weight)


def _recorded_matryoshka(recorded: object) -> bool:
    """Of the options ingest recorded, only the Matryoshka flag (a query truncated like the stored
    vectors needs it) is taken, and only as a boolean; anything else is ignored with a warning."""
    if not isinstance(recorded, dict) or not recorded:
        return False
    overrides = recorded.get("hf_overrides")
    matryoshka = isinstance(overrides, dict) and overrides.get("is_matryoshka") is True
    own = ("hf_overrides", "bm25", "learned_sparse")  # bm25, learned_sparse: ingest's own records
    ignored = sorted(k for k in recorded if k not in own)
    if isinstance(overrides, dict):
        ignored += sorted(f"hf_overrides.{k}" for k in overrides if k != "is_matryoshka")
    if ignored:
        logger.warning("ignoring model options recorded in the collection: %s", ", ".join(ignored))
    return matryoshka
