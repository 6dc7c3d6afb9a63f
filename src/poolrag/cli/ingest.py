"""``poolrag ingest PATH...``: fill a Milvus or Qdrant collection from text, Markdown and JSONL files.

Also home of the options ``poolrag search`` shares (store location, cache), so both commands
spell them the same way.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_extra, require_store_extra
from poolrag.cli.ingest_ray import add_ray_arguments
from poolrag.engine_args import EngineArgs, positive_int
from poolrag.stores.registry import store_kinds

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine
    from poolrag.cache import EmbeddingCache
    from poolrag.engine import Engine
    from poolrag.ingest.encoders import ChunkEncoder
    from poolrag.ingest.pipeline import IngestReport
    from poolrag.ingest.sparse_encoders import SparseChunkEncoder
    from poolrag.sparse.words import WordAnalyzer
    from poolrag.stores.address import StoreAddress
    from poolrag.stores.base import VectorStore
    from poolrag.stores.language_prior import LanguageRecord

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_STORE_WRITE = 4  # the store's disk refused a write: full, size limit, read-only, permission


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("vector store")
    kinds = store_kinds()  # the store registry, read when the parser is built
    group.add_argument("--store", choices=kinds, default=kinds[0], help=f"default: {kinds[0]}")
    group.add_argument("--uri", help="milvus: a Milvus Lite file (default ./poolrag_milvus.db) or server URL")
    group.add_argument(
        "--path", help="qdrant / qdrant-edge: local folder (default ./poolrag_qdrant, ./poolrag_edge)"
    )
    group.add_argument("--url", help="qdrant: server URL, e.g. http://localhost:6333")
    group.add_argument("--api-key", help="server API key / token (qdrant url, milvus server)")
    group.add_argument("--collection", default="poolrag", help="collection name (default: poolrag)")
    group.add_argument("--retries", type=positive_int, default=5, help="attempts while the database is down")
    group.add_argument("--retry-delay", type=float, default=0.5, help="first backoff in seconds (doubles)")


def add_analyzer_arguments(group: Any) -> None:
    """``--analyzer`` and ``--language``: how BM25 splits text into terms (choices from fixed tables)."""
    from poolrag.sparse.words import ANALYZERS, DEFAULT_ANALYZER, DEFAULT_LANGUAGE, LANGUAGES

    group.add_argument(
        "--analyzer",
        choices=ANALYZERS,
        default=DEFAULT_ANALYZER,
        help="BM25 terms: 'words' (Unicode words, lower-cased, stop words out, stemmed, as search engines "
        f"do) or 'wordpiece' (the model tokenizer's pieces); recorded in the collection (default: "
        f"{DEFAULT_ANALYZER})",
    )
    group.add_argument(
        "--language",
        choices=sorted(LANGUAGES),
        metavar="LANGUAGE",
        help=f"the collection's language: stemmer and stop words of --analyzer words (default: "
        f"{DEFAULT_LANGUAGE}), and, recorded with the model card's languages, what lets the hybrid default "
        f"lean on BM25 when the model was not trained on it (one of {', '.join(sorted(LANGUAGES))})",
    )


def analyzer_from_args(args: argparse.Namespace) -> WordAnalyzer | None:
    """The word analyzer the flags name, or ``None`` for word pieces."""
    from poolrag.sparse.words import DEFAULT_LANGUAGE, WORDS, WordAnalyzer

    return WordAnalyzer(args.language or DEFAULT_LANGUAGE) if args.analyzer == WORDS else None


def languages_from_args(engine: Engine, args: argparse.Namespace) -> LanguageRecord | None:
    """The model card's languages and the collection's ``--language``; without ``--language`` the
    BM25 encoder detects the collection's from its first batch (where the card names the model's),
    and ``None`` when neither is known (the hybrid default then stays the default)."""
    from poolrag.ingest.sparse_encoders import collection_languages

    return collection_languages(engine.spec.path, args.language)


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("embedding cache")
    group.add_argument(
        "--cache", metavar="FILE", help="cache file (default: ~/.cache/poolrag/embeddings.sqlite)"
    )
    group.add_argument("--no-cache", action="store_true", help="embed everything, store nothing")
    group.add_argument("--cache-max-gb", type=float, default=1.0, help="size bound of the cache (default 1)")


def store_address_from_args(args: argparse.Namespace) -> StoreAddress:
    from poolrag.stores import RetryPolicy
    from poolrag.stores.address import StoreAddress

    retry = RetryPolicy(attempts=args.retries, base_delay=args.retry_delay)
    location = {"uri": args.uri, "path": args.path, "url": args.url}
    return StoreAddress(args.store, args.collection, **location, api_key=args.api_key, retry=retry)


def open_store_from_args(args: argparse.Namespace) -> VectorStore:
    return store_address_from_args(args).open()


def open_cache_from_args(args: argparse.Namespace) -> EmbeddingCache | None:
    if args.no_cache:
        return None
    from poolrag.cache import EmbeddingCache

    return EmbeddingCache(args.cache, max_bytes=int(args.cache_max_gb * (1 << 30)))


def load_engine(args: EngineArgs) -> Engine:
    from poolrag import Engine

    return Engine.from_engine_args(args)


def engine_args_from(args: argparse.Namespace) -> EngineArgs:
    """The main model's engine flags (``--model``, else the default model)."""
    from poolrag.ingest import default_model

    return EngineArgs.from_cli_args(args, model=args.model or default_model())


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def report_error(command: str, exc: BaseException) -> int:
    """One line on stderr naming what went wrong; exit 3 for a database that is down, 4 for a store
    whose disk refused a write, else 2."""
    from poolrag.stores import StoreUnavailableError
    from poolrag.stores.storage_faults import StoreWriteError

    if isinstance(exc, StoreWriteError):
        print(f"poolrag {command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_STORE_WRITE
    if isinstance(exc, OSError) and not isinstance(exc, StoreUnavailableError) and exc.filename:
        message = f"{exc.filename}: {exc.strerror or exc}"
    else:
        message = str(exc) or type(exc).__name__
    print(f"poolrag {command}: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_UNAVAILABLE if isinstance(exc, StoreUnavailableError) else EXIT_BAD_INPUT


def user_errors() -> tuple[type[BaseException], ...]:
    """What a command reports as one line instead of a traceback: poolrag's own errors and the
    operating system's (a path that cannot be read or written)."""
    from poolrag.errors import PoolragError

    return (PoolragError, OSError)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="chunk, embed (cached) and upsert documents into Milvus or Qdrant",
        description=(
            "Read .txt/.md/.rst/.jsonl files (folders recursively), chunk them by tokens, embed through "
            "the on-disk cache and upsert into a collection. Re-running adds nothing new, a killed run "
            "resumes from its checkpoint, and changed documents replace their old chunks."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to ingest")
    add_store_arguments(parser)
    model = parser.add_argument_group("model")
    model.add_argument("--model", help="hub id or folder (default: all-MiniLM-L6-v2, offline if packaged)")
    model.add_argument(
        "--dimensions",
        type=positive_int,
        help="store Matryoshka-truncated vectors of this size; full vectors stay in the cache for re-scoring",
    )
    model.add_argument(
        "--assume-matryoshka",
        action="store_true",
        help="treat the model as Matryoshka-trained (only if it was: truncating other models loses quality)",
    )
    model.add_argument(
        "--hybrid",
        action="store_true",
        help="also store a sparse vector per chunk, for 'poolrag search --hybrid': from --sparse-model, "
        "else the model's own sparse head (BGE-M3, same forward pass), else lexical BM25 over its "
        "tokenizer; a new collection is needed for it",
    )
    model.add_argument(
        "--sparse-model",
        metavar="MODEL",
        help="with --hybrid: a learned sparse model (SPLADE hub id or folder) for the sparse vectors",
    )
    add_analyzer_arguments(model)
    EngineArgs.add_cli_args(parser)  # how the model runs: never recorded in the collection
    chunking = parser.add_argument_group("chunking and writing")
    chunking.add_argument(
        "--chunk-tokens", type=positive_int, help="tokens per chunk (default: min(256, model max))"
    )
    chunking.add_argument(
        "--overlap", type=int, default=32, help="tokens shared by neighbouring chunks (default 32)"
    )
    chunking.add_argument("--batch-size", type=positive_int, default=64, help="chunks per embed+upsert step")
    chunking.add_argument(
        "--index-quantization",
        choices=("int8", "binary"),
        help="quantized index for a new collection (--quantization is the model's weights)",
    )
    chunking.add_argument(
        "--prune", action="store_true", help="delete chunks of sources not given in this run"
    )
    chunking.add_argument(
        "--late-chunking",
        action="store_true",
        help="one pass per document, each chunk mean-pooled from it (mean-pooling models)",
    )
    chunking.add_argument("--text-field", default="text", help="JSONL field holding the text (default: text)")
    chunking.add_argument(
        "--checkpoint", metavar="FILE", help="progress file (default: under the cache folder)"
    )
    chunking.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first file that cannot be read (default: skip it and list it at the end)",
    )
    add_cache_arguments(parser)
    add_ray_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not require_store_extra("ingest", args.store):
        return EXIT_MISSING_EXTRA
    if args.ray is not None and not require_extra("ingest --ray", "ray"):
        return EXIT_MISSING_EXTRA
    setup_logging(args.verbose)
    opened: list[Any] = []  # the cache and the store, closed even when the run fails
    try:
        report = _ingest(args, opened)
    except user_errors() as exc:
        return report_error("ingest", exc)
    finally:
        for resource in reversed(opened):
            resource.close()
    if args.json:
        print(
            json.dumps(
                report.__dict__
                | {"from_cache": report.from_cache, "chunks_per_second": report.chunks_per_second}
            )
        )
    else:
        print(
            f"ingested {report.documents} documents into {args.store} collection {args.collection!r}: "
            f"{report.chunks} chunks: {report.embedded} embedded now, {report.from_cache} taken from "
            f"cache, {report.chunks_existing} already stored; {report.deleted} deleted, "
            f"{report.seconds:.1f}s" + (" (resumed)" if report.resumed else "")
        )
    if report.skipped:
        noun = "file" if len(report.skipped) == 1 else "files"
        print(f"{len(report.skipped)} {noun} skipped:", file=sys.stderr)
        for line in report.skipped:
            print(f"  {line}", file=sys.stderr)
    return 0


def _ingest(args: argparse.Namespace, opened: list[Any]) -> IngestReport:
    from poolrag.errors import InvalidInputError
    from poolrag.ingest import IngestPipeline, TokenChunker, read_paths
    from poolrag.stores import check_collection_name

    # Check the cheap things (paths, names, the cache) before loading a model or touching a database.
    check_collection_name(args.collection)
    if args.sparse_model and not args.hybrid:
        raise InvalidInputError("--sparse-model goes with --hybrid")
    for raw in args.paths:
        if not os.path.lexists(raw):
            raise InvalidInputError(f"no such file or folder: {raw}")
    skipped: list[Any] | None = None if args.fail_fast else []
    documents = read_paths(args.paths, text_field=args.text_field, skipped=skipped)  # read lazily
    cache = open_cache_from_args(args)
    if cache is not None:
        opened.append(cache)
    overrides = dict(args.hf_overrides or {}) | ({"is_matryoshka": True} if args.assume_matryoshka else {})
    # What changes the vectors is recorded in the collection; how the forward runs is not.
    options: dict[str, Any] = {"hf_overrides": overrides} if overrides else {}
    engine_args = engine_args_from(args).replace(hf_overrides=overrides or None)
    if engine_args.quantization is not None:  # the flag once meant the index's compression
        logger.warning(
            "--quantization %s quantizes the model's weights (as in serve); an int8 or binary index is "
            "--index-quantization",
            engine_args.quantization,
        )
    if args.late_chunking and (args.ray is not None or args.hybrid):
        raise InvalidInputError(
            "--late-chunking runs in this process with dense vectors: drop --ray / --hybrid"
        )
    if args.ray is not None:  # the actors load the engine: poolrag.cli.ingest_ray
        from poolrag.cli.ingest_ray import ingest_on_ray_from_args, refuse_unsupported

        refuse_unsupported(args)
        store = open_store_from_args(args)
        opened.append(store)
        files_left_out = () if skipped is None else skipped  # filled while the documents are read
        checkpoint_dir = None if args.cache is None else _parent(args.cache)
        return ingest_on_ray_from_args(
            args, documents, files_left_out, store, cache, engine_args, options, checkpoint_dir
        )
    engine = load_engine(engine_args)
    if args.late_chunking and engine.pooler_config.pooling_type != "MEAN":
        raise InvalidInputError(
            f"--late-chunking needs a mean-pooling model; {engine.model_name} pools by "
            f"{engine.pooler_config.pooling_type}"
        )
    encoder = _encoder(engine, cache, args.dimensions)
    sparse_encoder = None
    if args.hybrid:
        encoder, sparse_encoder = _hybrid_encoders(engine, encoder, cache, args, engine_args)
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts, args.chunk_tokens, args.overlap)
    store = open_store_from_args(args)
    opened.append(store)
    pipeline = IngestPipeline(
        store,
        encoder,
        chunker,
        batch_size=args.batch_size,
        quantization=args.index_quantization,
        model_options=options,
        checkpoint_path=args.checkpoint,
        checkpoint_dir=None if args.cache is None else _parent(args.cache),
        progress=not args.quiet,
        sparse_encoder=sparse_encoder,
        late_chunking=args.late_chunking,
    )
    return pipeline.run(documents, prune=args.prune, skipped=() if skipped is None else skipped)


def _encoder(engine: InProcessEngine, cache: EmbeddingCache | None, dimensions: int | None) -> ChunkEncoder:
    """Token vectors for a ColBERT model, else single vectors through the cache.

    Whether ``--dimensions`` is allowed is :meth:`PoolingParams.verify`'s decision (the encoders
    call it); this only says which flag to change.
    """
    from poolrag.cache import CachedEmbedder
    from poolrag.errors import DimensionsError
    from poolrag.ingest import ColbertEncoder, DenseEncoder
    from poolrag.model_facts import ScoreKind
    from poolrag.params import PoolingParams

    facts = engine.facts
    try:
        if facts.score_kind is ScoreKind.MAXSIM:
            PoolingParams(dimensions=dimensions).verify("token_embed", facts)
            return ColbertEncoder(engine)
        return DenseEncoder(CachedEmbedder(engine, cache), dimensions)
    except DimensionsError as exc:
        hint = "" if facts.is_matryoshka else "; add --assume-matryoshka only if the model was trained for it"
        raise DimensionsError(f"--dimensions {dimensions}: {exc}{hint}") from None


def _sparse_encoder(
    engine: InProcessEngine,
    cache: EmbeddingCache | None,
    analyzer: WordAnalyzer | None = None,
    languages: LanguageRecord | None = None,
) -> SparseChunkEncoder:
    """Lexical BM25 over words (or the model's own word pieces): hybrid search with no second model."""
    from poolrag.errors import InvalidInputError
    from poolrag.ingest.sparse_encoders import bm25_for_model
    from poolrag.model_facts import ScoreKind

    if engine.facts.score_kind is ScoreKind.MAXSIM:
        raise InvalidInputError("--hybrid goes with single-vector models, not ColBERT token vectors")
    return bm25_for_model(engine.tokenizer, engine.facts.model_identity, cache, analyzer, languages)


def _hybrid_encoders(
    engine: Engine,
    encoder: ChunkEncoder,
    cache: EmbeddingCache | None,
    args: argparse.Namespace,
    engine_args: EngineArgs,
) -> tuple[ChunkEncoder, SparseChunkEncoder]:
    """The sparse source ``--hybrid`` uses: a named sparse model, the main model's own sparse head
    (its dense encoder then shares the forward pass), or BM25 over the main model's tokenizer."""
    from poolrag.ingest.shared_pass import has_sparse_head, own_head_encoders
    from poolrag.ingest.sparse_encoders import LearnedSparseChunkEncoder

    if args.sparse_model:
        _sparse_encoder(engine, cache)  # the same refusal of ColBERT collections as BM25's
        sparse_model = load_sparse_model(engine_args.sibling(args.sparse_model))
        return encoder, LearnedSparseChunkEncoder(sparse_model, cache)
    if has_sparse_head(engine):
        return own_head_encoders(engine, cache, args.dimensions)
    languages = languages_from_args(engine, args)
    return encoder, _sparse_encoder(engine, cache, analyzer_from_args(args), languages)


def load_sparse_model(engine_args: EngineArgs) -> Engine:
    """Load a learned sparse model once, refusing one that makes no sparse vectors."""
    from poolrag.errors import InvalidInputError

    engine = load_engine(engine_args)
    model = engine_args.model
    if "sparse_embed" not in engine.supported_tasks:
        raise InvalidInputError(f"--sparse-model {model}: the model makes no sparse vectors (not SPLADE)")
    return engine


def _parent(path: str) -> str:
    from pathlib import Path

    return str(Path(path).expanduser().resolve().parent)
