"""Ctrl-C once stops a resumable command cleanly; Ctrl-C again stops it at once.

The first Ctrl-C says at once that the command stops and how to resume it, then raises
``KeyboardInterrupt``: the store and cache close, the batch in flight ends and the checkpoint is
kept (seconds, which were silent). ``SIGTERM`` (``kill``, ``timeout``, a container or service manager
stopping the job) stops it the same way, as :class:`Terminated`, exit status 143. That can take
seconds (a forward on the embedding thread, Milvus Lite's close), and a user who presses Ctrl-C
again means "now". A second Ctrl-C therefore ends the process on the spot, saying so: what is not
checkpointed is redone by the re-run, as after ``kill -9``.

Once a command has returned, the interpreter may still wait at exit for a background compile's or
a first load's measuring step (seconds to minutes); a Ctrl-C then ends the process at once too.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: Exit status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 130
#: Exit status of a command stopped by SIGTERM (128 + 15).
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises ``KeyboardInterrupt`` so the run stops the same clean way."""


def stopped_line(command: str, terminated: bool, after: str | None) -> str:
    """The one line a stopped command says: how it stopped, and ``after`` (how to resume) if any."""
    how = "terminated" if terminated else "interrupted"
    return f"poolrag {command}: {how}" + (f"; {after}" if after else "")


@contextmanager
def second_interrupt_exits(command: str, after: str) -> Iterator[threading.Event]:
    """Within the block, the first Ctrl-C says the command's one line (with ``after``) at once, and
    one after it ends the process, saying so. The event yielded is set once the line is said.

    Only in the main thread (where Python delivers signals). The previous handler is restored
    unless a Ctrl-C came: the process is then on its way out, and a second one may come after the
    block (while the interpreter waits for the embedding thread)."""
    said = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield said
        return

    def exit_now(signum: int, frame: FrameType | None) -> None:
        os.write(2, f"poolrag {command}: interrupted again, stopped now; {after}\n".encode())
        os._exit(EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED)

    def first(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, exit_now)
        signal.signal(signal.SIGTERM, exit_now)
        line = stopped_line(command, signum == signal.SIGTERM, after)
        os.write(2, f"{_below_progress_bars()}{line}\n".encode())
        said.set()
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    previous_term = signal.signal(signal.SIGTERM, first)
    try:
        yield said
    finally:
        if signal.getsignal(signal.SIGINT) is first:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, previous_term)


def _below_progress_bars() -> str:
    """A line end when a progress bar is open: its line has none while it is drawn, and a line
    said then would be glued to its right."""
    tqdm = sys.modules.get("tqdm")  # no bar was ever drawn if tqdm was never imported
    return "\n" if tqdm is not None and len(getattr(tqdm.tqdm, "_instances", ())) else ""


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block (main thread only), ``SIGTERM`` raises :class:`Terminated` where Ctrl-C
    raises ``KeyboardInterrupt``: a command that stops cleanly on one stops so on the other."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_EXITING_COMMAND: list[str] = []  # the command a Ctrl-C at exit names; set once the exit hook is in


def interrupt_ends_the_exit(command: str) -> None:
    """From interpreter exit on, a Ctrl-C ends the process at once, saying so, instead of breaking
    into the exit's waits for background steps (a traceback from the threading module, then the
    process torn down around a thread still inside torch). Call it once the command has returned,
    after the background modules registered their waits: the hook registered last runs first."""
    if not _EXITING_COMMAND:
        getattr(threading, "_register_atexit", atexit.register)(_stop_at_once_on_interrupt)
    _EXITING_COMMAND[:] = [command]


def _stop_at_once_on_interrupt() -> None:
    # a handler of the command's own (ingest's second Ctrl-C) or of a program embedding main() stays
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    command = _EXITING_COMMAND[0]

    def exit_now(signum: int, frame: FrameType | None) -> None:
        line = f"poolrag {command}: interrupted, stopped now without waiting for background work\n"
        os.write(2, line.encode())
        os._exit(EXIT_INTERRUPTED)

    signal.signal(signal.SIGINT, exit_now)
