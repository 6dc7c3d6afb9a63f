"""``poolrag ingest PATH...``: fill a Milvus or Qdrant collection from text, JSONL, CSV, web page,
Word and PDF files."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolrag.cli.command_errors import (
    dimensions_flag_error,
    log_lines_above_bars,
    report_error,
    setup_logging,
    user_errors,
)
from poolrag.cli.extras import EXIT_MISSING_EXTRA, require_extra, require_store_extra
from poolrag.cli.ingest_ray import add_ray_arguments
from poolrag.cli.model_loading import engine_args_from, load_engine
from poolrag.cli.store_options import (
    add_analyzer_arguments,
    add_cache_arguments,
    add_store_arguments,
    open_cache_from_args,
    store_address_from_args,
)
from poolrag.engine_args import EngineArgs, positive_int
from poolrag.errors import DimensionsError, InvalidInputError
from poolrag.stores.registry import store_entry
from poolrag.stores.vector_types import VECTOR_TYPES

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine
    from poolrag.cache import EmbeddingCache
    from poolrag.ingest.encoders import ChunkEncoder
    from poolrag.ingest.pipeline import IngestReport

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="chunk, embed (cached) and upsert documents into Milvus or Qdrant",
        description=(
            "Read .txt/.md/.rst/.jsonl files, CSV rows and the text of web pages, Word and PowerPoint "
            "files and PDFs (.csv/.html/.docx/.pptx/.pdf; folders recursively; with a model that "
            "reads images, such as CLIP, also .png/.jpg/.jpeg/.webp/.gif/.bmp/.tif/.tiff/.ico/.avif/.ppm "
            "images, and PDFs as their pages), "
            "chunk them by tokens, embed "
            "through the on-disk cache and upsert into a collection. Re-running adds nothing new, a killed "
            "run resumes from its checkpoint, and changed documents replace their old chunks."
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
    EngineArgs.add_engine_flags(parser)  # how the model runs: never recorded in the collection
    chunking = parser.add_argument_group("chunking and writing")
    chunking.add_argument(
        "--chunk-tokens", type=positive_int, help="tokens per chunk (default: min(256, model max))"
    )
    chunking.add_argument(
        "--overlap",
        type=int,
        help="tokens shared by neighbouring chunks where a cut falls inside a sentence (default: 32, or a "
        "quarter of the chunk if that is less; any value below the chunk size is taken)",
    )
    chunking.add_argument(
        "--batch-size", type=positive_int, default=64, help="chunks per embed+upsert step (default 64)"
    )
    for flag, ours in (("--chunk-size", "--chunk-tokens"), ("--chunk-overlap", "--overlap")):
        chunking.add_argument(flag, action=_CountedInCharacters, ours=ours, help=argparse.SUPPRESS)
    chunking.add_argument(
        "--index-quantization",
        choices=("int8", "binary"),
        help="quantized index for a new collection (--quantization is the model's weights); "
        "binary needs a Milvus server or Qdrant, not a Milvus Lite file",
    )
    chunking.add_argument(
        "--vector-type",
        choices=VECTOR_TYPES,
        help="what each vector is stored as (default: the collection's, else float32): float16 or uint8 "
        "are the bytes 'poolrag serve' sends for them (Qdrant stores only); uint8 needs --calibration",
    )
    chunking.add_argument(
        "--calibration",
        metavar="FILE",
        help="with --vector-type uint8: the ranges file 'poolrag calibrate' wrote (default: the model "
        "folder's quantization_ranges.json)",
    )
    chunking.add_argument(
        "--prune", action="store_true", help="delete chunks of sources not given in this run"
    )
    chunking.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out files and folders under the folders given, as .gitignore patterns "
        "(node_modules, '*.log', drafts/); repeatable. --prune deletes what they stored before",
    )
    chunking.add_argument(
        "--late-chunking",
        action="store_true",
        help="one pass per document, each chunk mean-pooled from it (mean-pooling models)",
    )
    chunking.add_argument(
        "--text-field",
        default="text",
        help="JSONL field or CSV column holding the text (default: text; a CSV without it: every column)",
    )
    chunking.add_argument(
        "--page-dpi",
        type=positive_int,
        default=150,
        help="with a model that reads images: the resolution PDF pages are rendered at (default 150)",
    )
    chunking.add_argument(
        "--page-size",
        type=positive_int,
        default=1024,
        metavar="PIXELS",
        help="with a model that reads images: a rendered page's longer side at most (64-8000; default 1024)",
    )
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


class _CountedInCharacters(argparse.Action):
    """LangChain's splitter settings, which count characters: refused naming poolrag's flag, which
    counts tokens (argparse alone said 'unrecognized arguments')."""

    def __init__(self, *args: Any, ours: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ours = ours

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        parser.error(
            f"{option_string}: poolrag counts chunks in the model's tokens: use {self.ours} N "
            "(a token is about 4 characters of English)"
        )


def run(args: argparse.Namespace) -> int:
    if not require_store_extra("ingest", args.store):
        return EXIT_MISSING_EXTRA
    if args.ray is not None and not require_extra("ingest --ray", "ray"):
        return EXIT_MISSING_EXTRA
    setup_logging(args.verbose, quiet=args.quiet)
    with contextlib.ExitStack() as opened:  # the cache and the store, closed even when the run fails
        opened.enter_context(log_lines_above_bars())
        if args.ray is not None:
            from poolrag.cli.ingest_ray import quiet_ray_start, worker_lines_on_stderr

            quiet_ray_start(args.verbose)
            opened.enter_context(worker_lines_on_stderr())  # closed last: after the store
        try:
            report, reads_texts, reads_images, record_files = _ingest(args, opened)
        except user_errors() as exc:
            return report_error("ingest", exc)
    empty = report.documents_without_text  # files read that hold no text: not among the documents
    if args.json:
        print(
            json.dumps(
                report.__dict__
                | {
                    "from_cache": report.from_cache,
                    "chunks_per_second": report.chunks_per_second,
                    "left_out": len(report.skipped),  # files and records; documents_skipped: resumed ones
                }
            )
        )
    elif not (report.documents or empty or report.deleted or report.skipped) and record_files:
        print(  # JSONL or CSV files without a row, each named in a warning above
            f"nothing to store: {_many(len(record_files), 'file')} with no records in {args.store} "
            f"collection {args.collection!r}, {report.seconds:.1f}s"
        )
    elif empty and not (report.documents or report.deleted or report.resumed):
        print(  # not "up to date": nothing was ever stored (the files are empty; warned of above)
            f"nothing to store: {_many(empty, 'document')} with no text in {args.store} "
            f"collection {args.collection!r}, {report.seconds:.1f}s"
        )
    elif report.documents and not (
        report.upserted or report.deleted or report.resumed or report.files_gone or report.files_excluded
    ):
        # a nightly re-run over an unchanged folder: say that nothing was done, not "ingested"; the
        # chunks stored, not those listed (a page left out when embedded is listed, never stored)
        print(
            f"up to date: {_many(report.documents, 'document')} in {args.store} collection "
            f"{args.collection!r}, {_many(report.chunks_existing, 'chunk')} already stored; nothing embedded "
            f"or deleted, {report.seconds:.1f}s; {_where(args)}"
        )
    else:
        print(
            f"ingested {_many(report.documents, 'document')} into {args.store} collection "
            f"{args.collection!r}: {_many(report.chunks, 'chunk')}: {report.embedded} embedded now, "
            f"{report.from_cache} {'identical to another chunk' if args.no_cache else 'taken from cache'}, "
            f"{report.chunks_existing} already stored; "
            f"{report.deleted} deleted, "
            f"{report.seconds:.1f}s"
            + (" (resumed)" if report.resumed else "")
            + _gone(report)
            + f"; {_where(args)}"
        )
    if not (report.documents or report.documents_skipped or empty or report.skipped or record_files):
        print(f"no documents in {', '.join(args.paths)}: {_what_is_read(reads_texts)}", file=sys.stderr)
    elif (unread := _not_read(args.paths, reads_texts, reads_images, args.exclude)) is not None:
        print(unread, file=sys.stderr)
    if report.skipped:  # files, or records of a JSONL or CSV file (path:line)
        print(f"{len(report.skipped)} left out:", file=sys.stderr)
        for line in report.skipped:
            print(f"  {line}", file=sys.stderr)
    return 0


def _gone(report: IngestReport) -> str:
    """The files an earlier run stored that are gone from disk or that ``--exclude`` left out (warned
    of, by name, above): their chunks are still searched until ``--prune``, so the summary does not
    leave them out."""
    said = ""
    for count, what in ((report.files_gone, "gone from disk"), (report.files_excluded, "excluded")):
        if count:
            them = "it" if count == 1 else "them"
            said += f"; {_many(count, 'file')} {what} still stored (--prune deletes {them})"
    return said


def _where(args: argparse.Namespace) -> str:
    """Where the collection is, for the summary: a user who took the default location learns it (a
    later ``search`` or a framework's store needs it), and a server's URL says which server."""
    data = store_address_from_args(args).local_data()
    return f"in {data.resolve()}" if data is not None else f"at {args.url or args.uri}"


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _not_read(
    paths: list[str], reads_texts: bool, reads_images: bool | None, exclude: list[str]
) -> str | None:
    """A line for the files of a kind ingest reads that this model does not: they are not listed,
    so without it a mixed folder's images (or, for ColPali, its text files) vanish without a word."""
    from poolrag.ingest.readers import count_documents

    if not reads_texts and (
        count := count_documents(paths, pdfs=False, exclude=exclude, unlisted_folders=False)
    ):
        kind = _many(count, "text document")
        return f"{kind} not read: a page retriever reads pages (text is for a text model)"
    if reads_images is False and (
        count := count_documents(
            paths, images=True, texts=False, pdfs=False, exclude=exclude, unlisted_folders=False
        )
    ):
        kind = _many(count, "image file")
        return f"{kind} not read: this model reads text (CLIP or ColPali read them)"
    return None


def _what_is_read(reads_texts: bool) -> str:
    """What this run reads, for a run that found nothing to read."""
    from poolrag.ingest.readers import DOCUMENT_SUFFIXES
    from poolrag.ingest.visual_documents import IMAGE_SUFFIXES, PDF_SUFFIXES

    if not reads_texts:  # a page retriever (ColPali)
        pages = ", ".join(IMAGE_SUFFIXES + PDF_SUFFIXES)
        return f"a page retriever reads {pages} files (text files are for a text model)"
    kinds = ", ".join(DOCUMENT_SUFFIXES + PDF_SUFFIXES)
    return (
        f"poolrag reads {kinds} files (and, with a model that reads images such as CLIP, images; "
        "save other documents as one of these first)"
    )


def _refuse_flags_without_their_mode(args: argparse.Namespace) -> None:
    """A flag that only changes what ``--hybrid`` or ``--ray`` do is refused without it: taken, the
    run was local and dense and said nothing of the sparse model, analyzer, language or actors it
    did not use."""
    from poolrag.sparse.words import DEFAULT_ANALYZER

    if args.ray is None and args.ray_workers != 1:
        raise InvalidInputError("--ray-workers goes with --ray")
    if args.hybrid:
        return
    given = {
        "--sparse-model": args.sparse_model,
        f"--analyzer {args.analyzer}": args.analyzer != DEFAULT_ANALYZER,
        "--language": args.language,
    }
    if flags := [flag for flag, value in given.items() if value]:
        raise InvalidInputError(f"{', '.join(flags)} {'goes' if len(flags) == 1 else 'go'} with --hybrid")


def _ingest(
    args: argparse.Namespace, opened: contextlib.ExitStack
) -> tuple[IngestReport, bool, bool | None, list[str]]:
    """The run's report, whether it read text files (a page retriever reads pages alone), whether
    it read images and PDFs (``None`` on Ray, whose actors read text files whatever the model), and
    the JSONL and CSV files it read to their end."""
    from poolrag.ingest import IngestPipeline, TokenChunker, read_paths
    from poolrag.ingest.pdf_pages import PageRendering
    from poolrag.ingest.readers import count_documents
    from poolrag.loaded_objects import freeze_loaded_objects
    from poolrag.model_facts import ScoreKind
    from poolrag.postprocess.quantization_ranges import QuantizationRanges, shipped_ranges
    from poolrag.stores import check_collection_name

    # Check the cheap things (paths, names, the cache) before loading a model or touching a database.
    check_collection_name(args.collection)
    _refuse_flags_without_their_mode(args)
    for raw in args.paths:
        if not os.path.lexists(raw):
            raise InvalidInputError(f"no such file or folder: {raw}")
    skipped: list[Any] | None = None if args.fail_fast else []
    checkpoint_dir = None if args.cache is None else str(Path(args.cache).expanduser().resolve().parent)
    rendering = PageRendering(args.page_dpi, args.page_size)  # checked before a model loads
    cache = open_cache_from_args(args)
    if cache is not None:
        opened.callback(cache.close)
    engine_args = engine_args_from(args, matryoshka=args.assume_matryoshka)
    # What changes the vectors is recorded in the collection; how the forward runs is not.
    options: dict[str, Any] = {"hf_overrides": engine_args.hf_overrides} if engine_args.hf_overrides else {}
    if engine_args.quantization is not None:  # the flag once meant the index's compression
        logger.warning(
            "--quantization %s quantizes the model's weights (as in serve); an int8 or binary index is "
            "--index-quantization",
            engine_args.quantization,
        )
    if args.calibration is not None and args.vector_type != "uint8":
        raise InvalidInputError("--calibration scales uint8 vectors: it goes with --vector-type uint8")
    if args.vector_type is not None:  # refused before the database file is made
        store_entry(args.store).store_class().check_vector_type(args.vector_type)
    if args.vector_type not in (None, "float32") and args.ray is not None:
        raise InvalidInputError(f"--vector-type {args.vector_type} is written by this process: drop --ray")
    # a bad --calibration file is reported before the model loads
    calibration = None if args.calibration is None else QuantizationRanges.load(args.calibration)
    if args.late_chunking and (args.ray is not None or args.hybrid):
        raise InvalidInputError(
            "--late-chunking runs in this process with dense vectors: drop --ray / --hybrid"
        )
    if args.ray is not None:  # the actors load the engine: poolrag.cli.ingest_ray
        from poolrag.cli.ingest_ray import connect_from_args, ingest_on_ray_from_args, refuse_unsupported

        refuse_unsupported(args)
        connect_from_args(args)
        store = store_address_from_args(args).open()
        opened.callback(store.close)
        documents = read_paths(  # read lazily
            args.paths, text_field=args.text_field, skipped=skipped, exclude=args.exclude
        )
        files_left_out = () if skipped is None else skipped  # filled while the documents are read
        report = ingest_on_ray_from_args(
            args, documents, files_left_out, store, cache, engine_args, options, checkpoint_dir
        )
        return report, True, None, documents.record_files
    engine = load_engine(engine_args)
    if calibration is not None:
        calibration.check_model(engine.facts)
    if args.vector_type not in (None, "float32") and engine.facts.score_kind is ScoreKind.MAXSIM:
        raise InvalidInputError(  # said first: normalising would not make its token vectors compact
            f"--vector-type {args.vector_type} is for dense collections; ColBERT token vectors stay "
            "float32: leave out --vector-type"
        )
    if args.vector_type not in (None, "float32") and not engine.facts.normalizes_embeddings:
        raise InvalidInputError(  # before the store is opened: the compact collection holds unit vectors
            f"--vector-type {args.vector_type} stores vectors compared by dot product, a cosine only for "
            f"unit-length vectors, and {engine.facts.model_name} does not normalise its embeddings: add "
            "--pooler-config '{\"normalize\": true}' (to calibrate and search too), or store float32"
        )
    if args.late_chunking and (refusal := engine.late_chunking_refusal) is not None:
        raise InvalidInputError("--" + refusal)
    reads_images = engine.facts.reads_images
    if reads_images and args.dimensions is not None:
        raise InvalidInputError(
            "--dimensions: a model that reads images stores its full vectors (an image's full vector "
            "cannot be re-computed from its text at search time); leave out --dimensions"
        )
    encoder = _encoder(engine, cache, args.dimensions)
    sparse_encoder = None
    if args.hybrid:
        from poolrag.cli.hybrid_sources import hybrid_sources

        encoder, sparse_encoder = hybrid_sources(engine, encoder, cache, args, engine_args, args.dimensions)
    chunker = TokenChunker.for_model(
        engine.tokenizer, engine.facts, args.chunk_tokens, args.overlap, prompt=engine.document_prompt
    )
    store = store_address_from_args(args).open()
    opened.callback(store.close)
    pipeline = IngestPipeline(
        store,
        encoder,
        chunker,
        batch_size=args.batch_size,
        quantization=args.index_quantization,
        model_options=options,
        checkpoint_path=args.checkpoint,
        checkpoint_dir=checkpoint_dir,
        progress=not args.quiet,
        sparse_encoder=sparse_encoder,
        late_chunking=args.late_chunking,
        vector_type=args.vector_type,
        # a uint8 run without --calibration takes the model folder's own ranges, as 'serve' does
        ranges=calibration or (shipped_ranges(engine.model_folder) if args.vector_type == "uint8" else None),
    )
    # The bar starts at its total: the files are listed (and JSONL or CSV records counted) once more for it.
    # a page retriever (ColPali) reads pages, so a folder's text files are not its documents
    texts = not (reads_images and engine.facts.score_kind is ScoreKind.MAXSIM)
    total = (
        None
        if args.quiet
        else count_documents(args.paths, images=reads_images, texts=texts, exclude=args.exclude)
    )
    # read lazily; image files only for a model that reads images, which reads a PDF's pages too
    documents = read_paths(
        args.paths,
        text_field=args.text_field,
        skipped=skipped,
        images=rendering if reads_images else None,
        texts=texts,
        exclude=args.exclude,
    )
    freeze_loaded_objects()  # the models are loaded: full collections need not walk them
    report = pipeline.run(
        documents, prune=args.prune, skipped=() if skipped is None else skipped, total=total
    )
    return report, texts, reads_images, documents.record_files


def _encoder(engine: InProcessEngine, cache: EmbeddingCache | None, dimensions: int | None) -> ChunkEncoder:
    """Token vectors for a ColBERT model, else single vectors through the cache.

    Whether ``--dimensions`` is allowed is :meth:`PoolingParams.verify`'s decision (the encoders
    call it; a ColBERT collection keeps its token vectors whole); this only says which flag to change.
    """
    from poolrag.cache import CachedEmbedder
    from poolrag.ingest import ColbertEncoder, DenseEncoder
    from poolrag.model_facts import ScoreKind

    facts = engine.facts
    try:
        if facts.score_kind is ScoreKind.MAXSIM:
            if dimensions is not None:  # the engine cuts token vectors; stores and search keep them whole
                raise DimensionsError(
                    "a ColBERT collection stores the model's token vectors whole; --dimensions applies "
                    "to single-vector models"
                )
            return ColbertEncoder(engine)
        return DenseEncoder(CachedEmbedder(engine, cache), dimensions)
    except DimensionsError as exc:
        if dimensions is None or facts.score_kind is ScoreKind.MAXSIM:
            raise DimensionsError(f"--dimensions {dimensions}: {exc}") from None
        raise dimensions_flag_error(dimensions, facts, exc) from None
