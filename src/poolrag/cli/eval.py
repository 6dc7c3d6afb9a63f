"""``poolrag eval DATASET``: recall@k, MRR@k and nDCG@k of each retrieval mode on a BEIR-layout folder.

The corpus is ingested with the same store options, cache and chunk ids as ``poolrag ingest`` (a
second run embeds nothing), into a collection with a dense and a sparse field (BM25, or learned
weights from --sparse-model or the model's own sparse head), so every mode is measured on one
collection. A named collection written without a sparse field is measured in the dense mode only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolrag.cli.command_errors import log_lines_above_bars, report_error, setup_logging, user_errors
from poolrag.cli.eval_tune import add_tune_arguments, check_tune_arguments, tune_and_save, tuned_summary
from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_store_extra
from poolrag.cli.model_loading import engine_args_from, load_engine
from poolrag.cli.store_options import (
    add_analyzer_arguments,
    add_cache_arguments,
    add_store_arguments,
    open_cache_from_args,
    store_address_from_args,
)
from poolrag.engine_args import EngineArgs, positive_int, unit_interval
from poolrag.errors import InvalidInputError
from poolrag.evaluation.metrics import DEFAULT_METRICS

if TYPE_CHECKING:
    from poolrag.evaluation.run import EvalReport
    from poolrag.evaluation.tune import TuneReport
    from poolrag.stores.base import VectorStore

logger = logging.getLogger(__name__)

DEFAULT_MODES = "dense,sparse,hybrid"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure retrieval modes (dense, sparse, hybrid, reranked) on a BEIR-layout dataset",
        description=(
            "Ingest DATASET/corpus.jsonl like 'poolrag ingest --hybrid' (cached: a second run embeds "
            "nothing), run every query of DATASET/queries.jsonl judged in DATASET/qrels/SPLIT.tsv in each "
            "mode, and print recall@k, MRR@k and nDCG@k per mode. A document scores its best chunk."
        ),
    )
    parser.add_argument("dataset", metavar="DATASET", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/")
    add_store_arguments(
        parser,
        collection=None,
        collection_help="collection name (default: eval_<DATASET folder name>, a sparse source other than "
        "the default BM25 adding _<analyzer>[_<language>] or _sparse_<--sparse-model>; kept equal to the "
        "corpus; a named one is searched as it is)",
    )
    parser.add_argument(
        "--modes",
        help=f"comma-separated, from dense, sparse, hybrid, hybrid+rerank, hybrid+rerank-replace, saved "
        "(hybrid fused as the collection's --tune --save record says, as poolrag search does) "
        f"(default: {DEFAULT_MODES}, plus both rerank modes with --rerank)",
    )
    parser.add_argument("--model", help="embedding model (default: all-MiniLM-L6-v2)")
    parser.add_argument(
        "--sparse-model",
        metavar="MODEL",
        help="learned sparse model (SPLADE) for the sparse field (default: the model's own sparse head "
        "when it has one, as BGE-M3 does, else BM25 over its tokenizer)",
    )
    add_analyzer_arguments(parser)
    parser.add_argument(
        "--rerank",
        metavar="MODEL",
        help="cross-encoder for the hybrid+rerank modes; it reranks the max(10k, 50) hybrid candidates "
        "'poolrag search --rerank' reranks by default",
    )
    parser.add_argument(
        "--rerank-weight",
        type=unit_interval,
        help="the reranker's share when fusing (default 0.5, or 0.2 where the reranker's model card "
        "does not declare the collection's language)",
    )
    EngineArgs.add_engine_flags(parser)  # the model's; --sparse-model and --rerank run the same way
    parser.add_argument("-k", type=positive_int, default=10, help="metrics at this cut-off (default 10)")
    parser.add_argument("--split", default="test", help="qrels/SPLIT.tsv to judge by (default: test)")
    parser.add_argument(
        "--prefetch",
        type=positive_int,
        help="depth of each hybrid leg (default: the chunks fused, at least 50)",
    )
    parser.add_argument("--chunk-tokens", type=positive_int, help="tokens per chunk (default: min(256, max))")
    parser.add_argument(
        "--overlap",
        type=int,
        help="tokens shared by neighbouring chunks (default 32, at most a quarter of a chunk)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=64, help="chunks per embed+upsert step (default 64)"
    )
    parser.add_argument("--checkpoint", metavar="FILE", help="ingest progress file (default: cache folder)")
    add_cache_arguments(parser)
    add_tune_arguments(parser)
    parser.add_argument("--json", action="store_true", help='print {"MODE": {"recall@10": ...}, ...}')
    parser.add_argument(
        "--save-runs",
        metavar="DIR",
        help="also write each mode's ranked documents as a TREC run file, DIR/run.MODE.trec "
        "(for trec_eval, pytrec_eval, ir_measures, ranx)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(handler=run)


#: the longest part a sparse source adds to a default collection's name (its end kept: a path's
#: last folders tell models apart), so that the name stays within every store's limit
_MAX_SUFFIX = 120


def default_collection(dataset: str, sparse_source: str = "") -> str:
    """``eval_<folder name>``, reduced to the characters every store accepts; a sparse source other
    than the default BM25 (another analyzer or language, a ``--sparse-model``) adds
    ``_<sparse_source>`` so that each source's vectors get a collection of their own."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(dataset).expanduser().resolve().name)
    suffix = re.sub(r"[^A-Za-z0-9_]", "_", sparse_source)[-_MAX_SUFFIX:]
    suffix = f"_{suffix}" if suffix else ""
    return f"eval_{name}"[: 200 - len(suffix)] + suffix


def _sparse_suffix(args: argparse.Namespace) -> str:
    """``""`` for the default BM25 analyzer, else what sets the sparse source apart: the analyzer and
    declared language, or ``sparse_<model>`` for a learned ``--sparse-model`` (named as given, a local
    folder by its full path). One collection shared by every source refused each run after the first
    as another source's (and a named ``--collection`` is not kept equal to the corpus)."""
    from poolrag.sparse.words import DEFAULT_ANALYZER, DEFAULT_LANGUAGE, WORDS

    if args.sparse_model:
        folder = Path(args.sparse_model).expanduser()
        model = folder.resolve().as_posix() if folder.is_dir() else args.sparse_model
        return "sparse_" + re.sub(r"[^A-Za-z0-9_]+", "_", model).strip("_")
    parts = [] if args.analyzer == DEFAULT_ANALYZER else [args.analyzer]
    if args.language is not None and not (args.analyzer == WORDS and args.language == DEFAULT_LANGUAGE):
        parts.append(args.language)  # a declared language is recorded: a collection of its own
    return "_".join(parts)


def run(args: argparse.Namespace) -> int:
    if not require_store_extra("eval", args.store):
        return EXIT_MISSING_EXTRA
    setup_logging(args.verbose, quiet=args.quiet)
    with contextlib.ExitStack() as opened:  # the cache and the store, closed even when the run fails
        opened.enter_context(log_lines_above_bars())
        try:
            if args.save_runs is not None:  # a folder that cannot be made fails before the work
                Path(args.save_runs).expanduser().mkdir(parents=True, exist_ok=True)
            report, tuned = _evaluate(args, opened)
        except user_errors() as exc:
            return report_error("eval", exc)
    if args.json:
        print(json.dumps(report.metrics | ({"tuned": tuned.to_json()} if tuned else {})))
    else:
        print(_table(report, args.k, args.collection))
        if tuned is not None:
            print(tuned_summary(tuned, args.save))
    if args.save_runs is not None:  # after the metrics: a run that cannot be written loses none of them
        from poolrag.evaluation.run import write_trec_runs

        try:
            for path in write_trec_runs(report.runs, Path(args.save_runs).expanduser()):
                logger.info("wrote %s", path)
        except user_errors() as exc:
            return report_error("eval", exc)
    return 0


def _modes(args: argparse.Namespace) -> list[str]:
    from poolrag.evaluation.run import RERANK_MODES, parse_modes

    default = DEFAULT_MODES + (",hybrid+rerank,hybrid+rerank-replace" if args.rerank else "")
    modes = parse_modes(args.modes or default)
    if args.tune and "dense" not in modes:  # the tuned setting is judged against dense
        modes.insert(0, "dense")
    needing = [m for m in modes if m in RERANK_MODES]
    if needing and not args.rerank:
        raise InvalidInputError(f"mode {', '.join(needing)} needs a cross-encoder: add --rerank MODEL")
    if args.rerank_weight is not None and not args.rerank:
        raise InvalidInputError("--rerank-weight is the reranker's share: add --rerank MODEL")
    return modes


def _evaluate(args: argparse.Namespace, opened: contextlib.ExitStack) -> tuple[EvalReport, TuneReport | None]:
    from poolrag.cache import CachedEmbedder, EmbeddingCache
    from poolrag.cli.hybrid_sources import check_hybrid_model, hybrid_sources
    from poolrag.evaluation import BeirDataset
    from poolrag.evaluation.run import SPARSE_MODES, Evaluation
    from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
    from poolrag.loaded_objects import freeze_loaded_objects
    from poolrag.stores import check_collection_name

    # The cheap checks first: modes, names, the dataset folder, before a model or database is touched.
    check_tune_arguments(args)
    modes = _modes(args)
    owned = args.collection is None  # eval's own collection mirrors the corpus; a named one is the user's
    args.collection = args.collection or default_collection(args.dataset, _sparse_suffix(args))
    check_collection_name(args.collection)
    dataset = BeirDataset(args.dataset)
    if args.tune:  # the folds need as many judged queries: known from the small files, before any model
        from poolrag.evaluation.tune import kfold

        kfold([q.id for q in dataset.judged_queries(args.split)[0]], args.folds, args.seed)
    cache = open_cache_from_args(args)
    if cache is None:  # queries are embedded once up front and read back during retrieval
        scratch = opened.enter_context(tempfile.TemporaryDirectory(prefix="poolrag-eval-"))
        cache = EmbeddingCache(Path(scratch) / "queries.sqlite")
    opened.callback(cache.close)
    engine_args = engine_args_from(args)
    engine = load_engine(engine_args)
    check_hybrid_model(engine)  # eval's collections are hybrid: refused before the store is opened
    store = store_address_from_args(args).open()
    opened.callback(store.close)
    hybrid = args.tune or any(m in SPARSE_MODES for m in modes)
    dense, sparse = DenseEncoder(CachedEmbedder(engine, cache)), None
    if _sparse_field(store, args, modes):  # else a collection ingested without --hybrid, measured as it is
        dense, sparse = hybrid_sources(engine, dense, cache, args, engine_args)
    reranker = load_engine(engine_args.sibling(args.rerank)) if args.rerank else None
    chunker = TokenChunker.for_model(
        engine.tokenizer, engine.facts, args.chunk_tokens, args.overlap, prompt=engine.document_prompt
    )
    pipeline = IngestPipeline(
        store,
        dense,
        chunker,
        batch_size=args.batch_size,
        checkpoint_path=args.checkpoint,
        checkpoint_dir=None if args.cache is None else str(Path(args.cache).expanduser().resolve().parent),
        progress=not args.quiet,
        sparse_encoder=sparse,
    )
    evaluation = Evaluation(
        pipeline,
        dense.embedder,
        sparse_encoder=sparse if hybrid else None,
        reranker=reranker,
        rerank_weight=args.rerank_weight,
    )
    freeze_loaded_objects()  # the models are loaded: full collections need not walk them
    report = evaluation.run(dataset, modes, k=args.k, split=args.split, prefetch=args.prefetch, prune=owned)
    return report, (tune_and_save(args, evaluation, dataset, report) if args.tune else None)


def _sparse_field(store: VectorStore, args: argparse.Namespace, modes: list[str]) -> bool:
    """Whether this run ingests with a sparse field: always, except into an existing collection
    written without one (``poolrag ingest`` without ``--hybrid``), which the modes that need no
    sparse field measure as it is; the others are refused there, saying which."""
    from poolrag.evaluation.run import SPARSE_MODES

    stored = store.read_spec()
    if stored is None or stored.sparse is not None:
        return True
    needing = [m for m in modes if m in SPARSE_MODES] + (["--tune"] if args.tune else [])
    if needing:
        raise InvalidInputError(
            f"collection {args.collection!r} has no sparse field (poolrag ingest wrote it without --hybrid), "
            f"and {', '.join(needing)} {'needs' if len(needing) == 1 else 'need'} one: measure it "
            "with --modes dense, or evaluate into another --collection (eval gives a new one both fields)"
        )
    return False


def _table(report: EvalReport, k: int, collection: str) -> str:
    names = [f"{m}@{k}" for m in DEFAULT_METRICS]
    width = max(len(mode) for mode in report.metrics) + 2
    lines = [
        f"{report.queries} queries; corpus: {report.ingest.documents} documents, "
        f"{report.chunks} chunks ({report.ingest.embedded} embedded now) in collection {collection!r}",
        "mode".ljust(width) + "".join(name.rjust(12) for name in names),
    ]
    for mode, values in report.metrics.items():
        lines.append(mode.ljust(width) + "".join(f"{values[name]:12.4f}" for name in names))
    lines.extend(_stages(report, k))
    saved = report.settings.get("saved_setting")
    if isinstance(saved, dict) and "saved" not in report.metrics:
        weight = "" if saved["sparse_weight"] is None else f" {saved['sparse_weight']:g}"
        lines.append(
            f"collection {collection!r} holds a tuned setting ({saved['fusion']}{weight}, legs "
            f"{saved['prefetch']} deep), which poolrag search uses; the hybrid rows fuse by the default: "
            "add saved to --modes to measure it"
        )
    return "\n".join(lines)


def _stages(report: EvalReport, k: int) -> list[str]:
    """The second stage beside the first it reranked: MRR@k of ``hybrid`` and each reranked mode."""
    first = report.metrics.get("hybrid")
    reranked = [m for m in report.metrics if m.startswith("hybrid+rerank")]
    if first is None or not reranked:
        return []
    key = f"mrr@{k}"
    cells = [f"hybrid {first[key]:.4f}"]
    cells += [
        f"{m} {report.metrics[m][key]:.4f} ({report.metrics[m][key] - first[key]:+.4f})" for m in reranked
    ]
    return [f"second stage vs first, MRR@{k}: " + " | ".join(cells)]
