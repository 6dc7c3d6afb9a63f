"""The ``poolrag`` command. Each subcommand lives in its own module of this package and adds
itself with ``register(subparsers)``; list a new one in :data:`SUBCOMMANDS`."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

SUBCOMMANDS = ("serve", "ingest", "search")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="poolrag", description="Serve and use pooling models for RAG.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"poolrag.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``poolrag`` script; each subcommand sets ``handler`` (returns an exit code)."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)
