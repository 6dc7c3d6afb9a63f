"""The ``poolrag`` command. Each subcommand lives in its own module of this package and adds
itself with ``register(subparsers)``; list a new one in :data:`SUBCOMMANDS`."""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import stat
import sys
from collections.abc import Sequence
from typing import NoReturn

from poolrag.cli.command_errors import EXIT_STORE_WRITE
from poolrag.cli.config_file import subcommand_parser, with_config_file
from poolrag.cli.dotted_flags import expand_dotted_flags
from poolrag.cli.interrupts import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    Terminated,
    interrupt_ends_the_exit,
    second_interrupt_exits,
    stopped_line,
)
from poolrag.cli.switch_values import spell_switch_values
from poolrag.native_heap import TRIM_INTERVAL_S, bound_arenas, trim_after_batches
from poolrag.worker_threads import take_cpu_quota

SUBCOMMANDS = ("serve", "ingest", "search", "eval", "tune", "calibrate")


class OneLineErrorParser(argparse.ArgumentParser):
    """A usage mistake is one line naming the option and the cause, not the whole usage text
    (``--help`` still prints it); subcommand parsers inherit this class from their parent. vLLM's
    dotted flags (``--pooler-config.task token_embed``) are read as their JSON object, TEI's
    ``--auto-truncate false`` as ``--no-auto-truncate``."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = sys.argv[1:] if args is None else args
        spelled = spell_switch_values(expand_dotted_flags(given, self.error))
        return super().parse_known_args(spelled, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, save that a flag no parser knows is reported by the subcommand it follows,
        whose ``--help`` lists the flags there are (the top parser's lists only the commands)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            try:
                owner = subcommand_parser(self, parsed.command)
            except (AttributeError, LookupError):  # a subcommand's parser itself, or no command
                owner = self
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


#: Exit status when the reader of stdout left (``poolrag search ... | head``): 128 + SIGPIPE, as a
#: shell reports a Unix tool stopped so.
EXIT_BROKEN_PIPE = 141


def build_parser() -> argparse.ArgumentParser:
    from poolrag import __version__

    parser = OneLineErrorParser(prog="poolrag", description="Serve and use pooling models for RAG.")
    parser.add_argument("--version", "-V", action="version", version=f"poolrag {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"poolrag.cli.{name}").register(subparsers)
    return parser


# PyTorch's oneDNN path keeps per-shape state: oneDNN one compiled primitive per matmul shape
# (1,024 by default), ideep one prepared linear computation per input shape and thread
# (``LRU_CACHE_CAPACITY``, 1,024). Token-budget batches have ever-different row counts, so a long
# ingest or a server fills both with entries it rarely reuses (each holds buffers sized to its
# batch). The CLI owns its process, so it bounds both before torch starts (a user's own setting
# wins) and trims glibc's heap after forward batches (:mod:`poolrag.native_heap`); a library
# caller decides for itself. Measured in benchmarks/RESULTS.md ("Ingest memory: the RSS curve").
# It also caps glibc's arenas, whose count sets what a burst leaves behind (``bound_arenas``).
NATIVE_CACHE_CAPACITY = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64", "LRU_CACHE_CAPACITY": "64"}


def bound_native_memory(trim_interval_s: float = TRIM_INTERVAL_S) -> None:
    """Bound torch's per-shape CPU caches and glibc's heap growth for this process (before torch
    loads); the heap is trimmed when a batch ends, at most every ``trim_interval_s``."""
    for name, capacity in NATIVE_CACHE_CAPACITY.items():
        os.environ.setdefault(name, capacity)
    bound_arenas()
    trim_after_batches(trim_interval_s)


#: What a stopped command leaves, said in its one line.
_RESUME = "run the same command again to resume where it stopped"
_AFTER_INTERRUPT = {"ingest": _RESUME, "eval": _RESUME}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``poolrag`` script; each subcommand sets ``handler`` (returns an exit code)."""
    try:
        try:
            return _run(argv)
        finally:  # what is still buffered too (``--help | head``): a reader gone shows here, not at exit
            if sys.stdout is not None:  # None: started with stdout closed
                sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_is_a_pipe():  # another pipe or socket broke: not the reader leaving
            raise
        # the reader left: stop quietly, and let nothing flush into the pipe again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # before a subcommand ran (its modules loading): nothing to close
        print("poolrag: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as full:  # the output's disk is full (``--json > /dev/full``): one line, as a store's
        if full.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        what = full.filename or "the output"  # a cache or model file names itself; stdout has no name
        print(f"poolrag: error: cannot write {what}: {full.strerror}", file=sys.stderr)
        if sys.stdout is not None:  # nothing more is flushed onto the full disk at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_STORE_WRITE


def _stdout_is_a_pipe() -> bool:
    try:
        return sys.stdout is not None and stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def _escape_what_stdout_cannot_encode() -> None:
    """Text the output's encoding lacks (a Chinese hit printed to an ASCII or Latin-1 stdout, or a
    Windows console's output redirected to a cp1252 file) is written as its escapes (``\\u65e5``),
    as Python writes stderr, not a ``UnicodeEncodeError`` traceback after the search ran."""
    stdout = sys.stdout
    if isinstance(stdout, io.TextIOWrapper) and stdout.errors == "strict":
        stdout.reconfigure(errors="backslashreplace")


def _run(argv: Sequence[str] | None) -> int:
    bound_native_memory()
    _escape_what_stdout_cannot_encode()
    parser = build_parser()
    args = with_config_file(parser, argv, parser.parse_args(argv))
    take_cpu_quota()  # its engines' torch threads: one per CPU of the affinity mask, whatever the quota
    after = _AFTER_INTERRUPT.get(args.command)
    try:
        return _run_command(args, after)
    finally:  # background modules loaded by the command have registered their exit waits by now
        interrupt_ends_the_exit(args.command)


def _run_command(args: argparse.Namespace, after: str | None) -> int:
    """The subcommand's handler; a Ctrl-C or SIGTERM that stopped it is its one line and exit code."""
    said = None
    try:
        if after is None:
            return int(args.handler(args) or 0)
        with second_interrupt_exits(args.command, after) as said:
            return int(args.handler(args) or 0)
    except KeyboardInterrupt as stop:  # the handler has closed its store and cache on the way out
        if said is None or not said.is_set():  # said when the signal came, before the closing
            print(stopped_line(args.command, isinstance(stop, Terminated), after), file=sys.stderr)
        return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
