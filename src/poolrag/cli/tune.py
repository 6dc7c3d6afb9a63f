"""``poolrag tune MODEL``: time the model's exact paths on this machine now and save the verdict.

What ``Engine(model)`` does at a model's first load, ahead of time and more thoroughly: compiled
candidates are timed too (each one compiles first, 35-45 s on two cores, and leaves its artifacts
in poolrag's compile cache for the engines that follow). Prints the candidates and the verdict.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from poolrag.cli.command_errors import EXIT_BAD_INPUT, EXIT_STORE_WRITE, log_at
from poolrag.engine_args import EngineArgs, positive_int
from poolrag.errors import InvalidInputError
from poolrag.worker_threads import take_worker_threads, worker_threads


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="time a model's exact paths on this machine and cache the fastest for later loads",
        description="Time the model's exact paths (native / transformers modules, eager / compiled) on "
        "this machine, keep those whose outputs match the reference (cosine >= 0.99999), and save the "
        "fastest as the verdict later loads of the model on this machine take (Engine, poolrag serve, "
        "ingest, search) when they load it with the same options and thread count.",
    )
    parser.add_argument("model", metavar="MODEL", help="hub id or local model folder")
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="time the eager candidates only (what a first load does; seconds instead of minutes)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="measure with the torch threads each of 'poolrag serve --workers N' takes (cores/N), so "
        "its workers take this verdict instead of measuring again (default 1: one process, torch's "
        "own thread count)",
    )
    # --cpu-fast-mode auto also times bf16 and int8 against exact; no --autotune: this always measures
    EngineArgs.add_engine_flags(parser, autotune=False)
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="poolrag's log lines on stderr (default: warning; the lines saying what is being timed "
        "show unless it is error)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    log_at(args.log_level)
    from poolrag import Engine, PoolragError
    from poolrag.core.autotune import PROGRESS_LOGGER

    if args.log_level != "error":  # minutes of timing: say what is being measured as it starts
        logging.getLogger(PROGRESS_LOGGER).setLevel(logging.INFO)

    try:
        engine_args = _engine_args(args)
    except PoolragError as exc:
        print(f"poolrag tune: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.workers > 1:  # a verdict is kept per thread count: measure with a serve worker's
        take_worker_threads(worker_threads(args.workers))
    try:
        engine = Engine.from_engine_args(engine_args)
    except (PoolragError, ValueError, OSError) as exc:
        print(f"poolrag tune: cannot load the model: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = engine.tune_report
    print(report.table())
    if report.state == "skipped":  # nothing to time, nothing saved: say why rather than an empty table
        print(f"nothing saved: {report.reason}")
    if report.state == "measured" and not report.path:  # saving it is the command's purpose
        print(
            "poolrag tune: the verdict was measured but not saved (the warning above says why); "
            "make the cache folder writable ($POOLRAG_CACHE_DIR) and run it again",
            file=sys.stderr,
        )
        return EXIT_STORE_WRITE
    if report.path:
        print(f"saved to {report.path}")
    return 0


def _engine_args(args: argparse.Namespace) -> EngineArgs:
    """The flags as every command reads them, measured now (``--autotune full``); ``--no-compile``
    is ``--compile off``."""
    if args.no_compile and args.compile not in (None, "off"):
        raise InvalidInputError(f"--no-compile contradicts --compile {args.compile}; give one of them")
    compile = "off" if args.no_compile else args.compile
    return EngineArgs.from_cli_args(args).replace(tune="full", compile=compile)
