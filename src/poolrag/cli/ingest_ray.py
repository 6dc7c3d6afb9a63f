"""``poolrag ingest ... --ray [ADDRESS]``: the ingest command's flags, run on a Ray cluster.

Kept beside :mod:`poolrag.cli.ingest` so that command only branches here: the same documents,
store, cache and model flags, with the embedding done by :mod:`poolrag.scaleout.ray_ingest`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from poolrag.engine_args import positive_int
from poolrag.errors import InvalidInputError

if TYPE_CHECKING:
    from poolrag.cache import EmbeddingCache
    from poolrag.engine_args import EngineArgs
    from poolrag.ingest.pipeline import IngestReport
    from poolrag.ingest.readers import PathDocuments
    from poolrag.stores.base import VectorStore


#: where Ray Data warns, once a process, that its progress bars are off (and how to turn them on)
RAY_DATA_PROGRESS_LOGGER = "ray.data._internal.progress"


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scaling out (the ray extra)")
    group.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="embed on Ray Data actors: join the cluster at ADDRESS (auto, ray://head:10001), or start "
        "one on this machine when no ADDRESS is given; put it after the paths or write --ray=ADDRESS",
    )
    group.add_argument(
        "--ray-workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="with --ray: embedding actors, each with its own engine (one GPU each where there are GPUs; "
        "default 1)",
    )


def quiet_ray_start(verbose: bool) -> None:
    """Called before a store opens a gRPC channel (Milvus does): Ray starts its processes by
    forking, and gRPC logs a line per fork while another thread uses it, read from
    ``GRPC_VERBOSITY`` when gRPC starts. Those lines are Ray's start-up noise, shown with -v
    (or the user's own ``GRPC_VERBOSITY``)."""
    if not verbose:
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@contextlib.contextmanager
def worker_lines_on_stderr() -> Iterator[None]:
    """Ray prints what its workers and raylet write to their stdout on this process's stdout (a
    dead actor's retry notes, from its log thread, some after the run), where they were mixed into
    the report (``--json``): for the run, and until Ray is disconnected and has printed its last
    buffered lines, they go to stderr, beside its other lines."""
    with contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        finally:
            import ray

            ray.shutdown()  # the cluster started for the run stops; a joined one is left


def refuse_unsupported(args: argparse.Namespace) -> None:
    """Flags the Ray path does not honour, refused before anything loads."""
    if args.sparse_model:
        raise InvalidInputError("--ray --hybrid makes BM25 vectors; ingest with --sparse-model without --ray")
    if isinstance(args.ray, str) and args.ray.startswith("ray://"):
        raise InvalidInputError(
            f"--ray {args.ray}: Ray Data does not run through Ray Client; run the ingest on a node of "
            "the cluster with --ray auto (or its HEAD:6379)"
        )


def connect_from_args(args: argparse.Namespace) -> None:
    """Join (or start) the cluster before the store is opened: a cluster that is not there leaves
    no empty collection behind."""
    from poolrag.scaleout.cluster import connect

    connect(args.ray, log_level=logging.INFO if args.verbose else logging.WARNING)  # Ray's lines: -v


def ingest_on_ray_from_args(
    args: argparse.Namespace,
    documents: PathDocuments,
    skipped: Sequence[Any],
    store: VectorStore,
    cache: EmbeddingCache | None,
    engine_args: EngineArgs,
    model_options: dict[str, Any],
    checkpoint_dir: str | None,
) -> IngestReport:
    import ray

    from poolrag.cli.store_options import store_address_from_args
    from poolrag.scaleout.ray_ingest import BM25Recipe, EngineRecipe, RayIngestOptions, ingest_on_ray

    ray.data.DataContext.get_current().enable_progress_bars = not args.quiet
    if args.quiet:  # asked for: not a WARNING telling how to turn them back on
        logging.getLogger(RAY_DATA_PROGRESS_LOGGER).setLevel(logging.ERROR)
    recipe = EngineRecipe(
        engine_args,
        dimensions=args.dimensions,
        chunk_tokens=args.chunk_tokens,
        overlap=args.overlap,
    )
    return ingest_on_ray(
        documents,
        store,
        recipe,
        cache=cache,
        options=RayIngestOptions(workers=args.ray_workers, write_batch=args.batch_size),
        quantization=args.index_quantization,
        model_options=model_options,
        prune=args.prune,
        skipped=skipped,
        record_files=documents.record_files,  # filled as the documents are read
        bm25=BM25Recipe(args.analyzer, args.language) if args.hybrid else None,
        checkpoint_path=args.checkpoint,
        checkpoint_dir=checkpoint_dir,
        store_address=store_address_from_args(args),
    )
