"""The ``poolrag`` command. Each subcommand lives in its own module of this package and adds
itself with ``register(subparsers)``; list a new one in :data:`SUBCOMMANDS`."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Sequence
from typing import NoReturn

SUBCOMMANDS = ("serve", "ingest", "search", "eval", "tune")


class OneLineErrorParser(argparse.ArgumentParser):
    """A usage mistake is one line naming the option and the cause, not the whole usage text
    (``--help`` still prints it); subcommand parsers inherit this class from their parent."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="poolrag", description="Serve and use pooling models for RAG.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"poolrag.cli.{name}").register(subparsers)
    return parser


# oneDNN keeps one compiled primitive per matmul shape (1,024 by default). Token-budget batches
# have ever-different row counts, so a long ingest or a server fills that cache with primitives it
# rarely reuses: ~200 MB of the peak RSS of a 10 MB ingest. The CLI owns its process, so it bounds
# the cache before torch starts (a user's own setting wins); a library caller decides for itself.
ONEDNN_CACHE_CAPACITY = "64"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``poolrag`` script; each subcommand sets ``handler`` (returns an exit code)."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_CACHE_CAPACITY)
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)
