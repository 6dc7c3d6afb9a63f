"""``poolrag calibrate PATH... --out FILE``: fixed int8 / uint8 ranges measured on the user's texts.

The texts are read and chunked as ``poolrag ingest`` reads them and embedded as documents, so the
ranges are those of the vectors a collection holds. The file is what ``poolrag serve
--calibration`` reads (and what a model folder may ship as ``quantization_ranges.json``).
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from poolrag.cli.command_errors import dimensions_flag_error, report_error, setup_logging, user_errors
from poolrag.cli.model_loading import engine_args_from, load_engine
from poolrag.cli.whole_numbers import at_least
from poolrag.engine_args import EngineArgs, positive_int
from poolrag.errors import DimensionsError, InvalidInputError

if TYPE_CHECKING:
    import numpy as np
    from tqdm import tqdm

    from poolrag.engine import Engine
    from poolrag.params import PoolingParams

logger = logging.getLogger(__name__)

DEFAULT_MAX_CHUNKS = 10_000
#: fewer chunks than this are warned of, as sentence-transformers warns of fewer calibration embeddings
FEW_CHUNKS = 100
#: Chunks per engine call while the bar shows: a few forward passes' worth at the CPU token budget,
#: so the engine still packs its batches well, and a bar that moves every few seconds.
PROGRESS_PIECE = 128


def spread_sample(items: Iterator[str], size: int) -> list[str]:
    """At most ``size`` of ``items``, each equally likely to be kept (reservoir sampling, seeded: the
    same files give the same ranges): a cap taking the first chunks read calibrated a big corpus on
    its first folders only."""
    chosen = random.Random(0)
    kept: list[str] = []
    for seen, item in enumerate(items):
        if seen < size:
            kept.append(item)
        elif (slot := chosen.randrange(seen + 1)) < size:
            kept[slot] = item
    return kept


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="measure fixed int8/uint8 ranges for a model on your texts (for serve --calibration)",
        description="Chunk and embed texts as 'poolrag ingest' does and save each dimension's minimum "
        "and maximum: the fixed scale int8/uint8 vectors take, whatever batch they come in.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or folders, read as 'poolrag ingest' reads them (.txt .md .rst .jsonl .csv .html .docx "
        ".pptx .pdf)",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="where to write the ranges (JSON)")
    parser.add_argument("--model", help="hub id or folder (default: all-MiniLM-L6-v2, offline if packaged)")
    parser.add_argument(
        "--dimensions",
        type=positive_int,
        nargs="+",
        metavar="N",
        help="Matryoshka widths to calibrate besides the model's default width",
    )
    parser.add_argument(
        "--assume-matryoshka",
        action="store_true",
        help="treat the model as Matryoshka-trained, as 'poolrag ingest --assume-matryoshka' does "
        "(only if it was: truncating other models loses quality)",
    )
    parser.add_argument(
        "--max-chunks",
        type=at_least(2, " (ranges need two chunks)"),  # one gives each dimension a min equal to its max
        default=DEFAULT_MAX_CHUNKS,
        help="chunks embedded at most, a seeded sample spread over every chunk read "
        f"(default {DEFAULT_MAX_CHUNKS})",
    )
    parser.add_argument(
        "--text-field",
        default="text",
        help="JSONL field or CSV column holding the text (default: text; a CSV without it: every column)",
    )
    parser.add_argument(
        "--chunk-tokens", type=positive_int, help="tokens per chunk (default: min(256, model max))"
    )
    EngineArgs.add_engine_flags(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose, quiet=args.quiet)
    left_out: list[Any] = []  # files 'poolrag ingest' would leave out too, listed at the end as it lists them
    try:
        _check_out(args.out)  # before minutes of embedding, not after
        ranges = _calibrate(args, left_out)
        path = ranges.save(args.out)
    except user_errors() as exc:
        return report_error("calibrate", exc)
    widths = ", ".join(str(width) for width in sorted(ranges.by_width))
    print(f"wrote {path} (ranges for {widths} dimensions)")
    if left_out:
        print(f"{len(left_out)} left out:", file=sys.stderr)
        for line in left_out:
            print(f"  {line}", file=sys.stderr)
    return 0


def _check_out(out: str) -> None:
    """``--out`` names a file that can be written: an existing folder, writable, and not a folder."""
    import os
    from pathlib import Path

    path = Path(out).expanduser()
    folder = path.parent
    if path.is_dir():
        raise InvalidInputError(f"--out {out}: a folder; name the ranges file to write")
    if not folder.is_dir():
        raise InvalidInputError(f"--out {out}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InvalidInputError(f"--out {out}: not writable")


def _calibrate(args: argparse.Namespace, left_out: list[Any]) -> Any:
    """The ranges of the chunks read from ``args.paths``; a file that cannot be read (not UTF-8, a
    broken link) goes to ``left_out`` rather than ending the run, as ``poolrag ingest`` treats it."""
    from poolrag.ingest.chunker import TokenChunker
    from poolrag.ingest.readers import read_paths
    from poolrag.postprocess.quantization_ranges import QuantizationRanges

    # --assume-matryoshka: the same model identity as the ingest that takes these ranges
    engine = load_engine(engine_args_from(args, matryoshka=args.assume_matryoshka))
    if "embed" not in engine.supported_tasks:
        raise InvalidInputError(
            f"--model {engine.facts.model_name}: the model gives no embeddings to calibrate"
        )
    widths: list[int | None] = [None, *(args.dimensions or [])]
    params = {width: _document_params(engine, width) for width in widths}  # before any chunk is read
    chunker = TokenChunker.for_model(
        engine.tokenizer, engine.facts, args.chunk_tokens, prompt=engine.document_prompt
    )
    chunks = (
        chunk.text
        for doc in read_paths(args.paths, text_field=args.text_field, skipped=left_out)
        for chunk in chunker.iter_chunks(doc)
    )
    texts = spread_sample(chunks, args.max_chunks)
    if len(texts) < 2:
        raise InvalidInputError(
            f"{' '.join(args.paths)}: calibration needs at least two chunks of text, found {len(texts)}"
        )
    if len(texts) < FEW_CHUNKS:
        logger.warning(
            "calibrating on %d chunks: ranges from fewer than %d rarely hold every value of the "
            "documents they will scale (those outside are clipped); calibrate on more of them",
            len(texts),
            FEW_CHUNKS,
        )
    logger.info("embedding %d chunks", len(texts))
    bar = None if args.quiet else _progress_bar(len(texts) * len(widths))
    vectors = {}
    try:
        for width in widths:
            array = _embed(engine, texts, params[width], bar)
            vectors[array.shape[1]] = array
    finally:
        if bar is not None:
            bar.close()
    return QuantizationRanges.from_vectors(vectors, engine.model_identity)


def _progress_bar(total: int) -> tqdm:
    """The bar over the chunks embedded (each width embeds every chunk), on stderr as ingest's: a
    sample of thousands of chunks takes minutes on a CPU. Redrawn at every piece (a few dozen, each
    a forward pass or more)."""
    from tqdm import tqdm

    return tqdm(total=total, desc="embedding", unit="chunk", dynamic_ncols=True, mininterval=0, miniters=1)


def _embed(engine: Engine, texts: list[str], params: PoolingParams, bar: tqdm | None) -> np.ndarray:
    """``texts``' vectors: in pieces of :data:`PROGRESS_PIECE` when a bar shows, so that it moves as
    each piece comes back, else in one call (the engine packs a whole list best)."""
    if bar is None:
        return engine.embed_array(texts, params)
    import numpy as np

    pieces = []
    for start in range(0, len(texts), PROGRESS_PIECE):
        pieces.append(engine.embed_array(texts[start : start + PROGRESS_PIECE], params))
        bar.update(len(pieces[-1]))
    return np.concatenate(pieces)


def _document_params(engine: Engine, width: int | None) -> PoolingParams:
    """The parameters documents are embedded with at ``width``, checked as the engine will check them
    (a width the model cannot take was found only after every chunk was embedded at full size)."""
    from poolrag.params import PoolingParams

    params = PoolingParams(input_type="document", dimensions=width)
    try:
        params.verify("embed", engine.facts)
    except DimensionsError as exc:
        if width is None:  # the model's own default size: no flag of the user's to name
            raise
        raise dimensions_flag_error(width, engine.facts, exc) from None
    return params
