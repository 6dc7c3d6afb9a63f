"""Ctrl-C stops ``poolrag ingest`` / ``eval`` cleanly with a line saying how to resume; a second
Ctrl-C, while the first is still closing things, ends the process at once and says so (seen from
outside: it went on for about 9 s in silence)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

RESUME = "run the same command again to resume where it stopped"
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    import poolrag.cli.ingest as ingest

    def handler(args):  # stands for a run whose clean stop is slow
        try:
            os.kill(os.getpid(), signal.SIGTERM if sys.argv[1] == "term" else signal.SIGINT)
            time.sleep(60)
        except KeyboardInterrupt:
            print("closing", flush=True)
            if sys.argv[1] == "twice":
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(60 if sys.argv[1] == "twice" else 2)
            raise

    ingest.run = handler
    from poolrag.cli import main
    sys.exit(main(["ingest", "docs"]))
    """
)


def _run(presses: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, presses], capture_output=True, text=True, timeout=45)


def test_one_ctrl_c_lets_the_command_close_and_says_how_to_resume() -> None:
    """The line comes at the Ctrl-C, not after the seconds of closing (seen from outside: 6-11 s of
    silence); it is still the one line."""
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "once"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == "closing\n"  # the handler closes for 2 s from here
    said = process.stderr.readline()
    assert process.poll() is None, "the line came only once the command had closed"
    assert said == f"poolrag ingest: interrupted; {RESUME}\n"
    process.communicate(timeout=45)
    done = _run("once")
    assert done.returncode == 130, done.stderr
    assert done.stdout == "closing\n"
    assert done.stderr.strip() == f"poolrag ingest: interrupted; {RESUME}"


def test_a_second_ctrl_c_stops_at_once_and_says_so() -> None:
    done = _run("twice")  # the handler would sleep 60 s: the 45 s timeout fails the test if it waited
    assert done.returncode == 130, done.stderr
    assert done.stdout == "closing\n"
    assert done.stderr.strip().splitlines() == [
        f"poolrag ingest: interrupted; {RESUME}",  # said at the first Ctrl-C, before the closing
        f"poolrag ingest: interrupted again, stopped now; {RESUME}",
    ]


def test_sigterm_stops_the_command_as_cleanly_and_says_how_to_resume() -> None:
    """``timeout``, ``kill`` or a service manager stopping a nightly job (seen from outside: it died
    in silence, leaving its scratch files to the next run)."""
    done = _run("term")
    assert done.returncode == 143, done.stderr
    assert done.stdout == "closing\n"
    assert done.stderr.strip() == f"poolrag ingest: terminated; {RESUME}"


def test_ctrl_c_while_the_command_starts_is_one_line_too() -> None:
    """Ctrl-C in the first fraction of a second (the subcommands' modules loading, the arguments
    being read), as when a user stops a command just typed: the one line and 130, not a traceback
    of the import machinery."""
    starting = textwrap.dedent(
        """
        import os, signal, sys
        import poolrag.cli as cli

        build = cli.build_parser
        def interrupted_while_building():  # stands for a Ctrl-C while the modules load
            os.kill(os.getpid(), signal.SIGINT)
            return build()

        cli.build_parser = interrupted_while_building
        sys.exit(cli.main(["search", "a query"]))
        """
    )
    done = subprocess.run([sys.executable, "-c", starting], capture_output=True, text=True, timeout=45)
    assert done.returncode == 130, done.stderr
    assert done.stdout == ""
    assert done.stderr == "poolrag: interrupted\n"


EXITING = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import poolrag.cli.search as search

    def handler(args):  # a command that ends while the interpreter still has work to wait for
        worker = threading.Thread(target=time.sleep, args=(60,), daemon=True)
        worker.start()
        # stands for a background compile's step, which the interpreter waits for at exit
        threading._register_atexit(worker.join)
        print("results", flush=True)
        return 0

    search.run = handler
    from poolrag.cli import main
    sys.exit(main(["search", "a query"]))
    """
)


def test_ctrl_c_while_a_finished_command_waits_for_background_work_stops_at_once() -> None:
    """A command whose answer is printed can still wait at exit for a background compile's or a
    first load's measuring step (``poolrag tune`` after a Ctrl-C, ``serve --compile background``):
    Ctrl-C then ends it at once with one line and 130 (it was ignored until the step ended, then a
    traceback from the threading module's shutdown)."""
    process = subprocess.Popen(
        [sys.executable, "-c", EXITING], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "results\n"
    time.sleep(1.0)  # the interpreter is waiting for the background step
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)  # the step would take 60 s
    assert process.returncode == 130, err
    assert out == ""
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("poolrag search: interrupted, stopped now"), err


BAR = textwrap.dedent(
    """
    import os, signal, sys, time
    from tqdm.auto import tqdm
    import poolrag.cli.ingest as ingest

    def handler(args):  # an ingest whose progress bar is drawn when Ctrl-C comes
        bar = tqdm(total=10, desc="ingesting", unit="doc", file=sys.stderr)
        try:
            bar.update(3)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(60)
        finally:
            bar.close()

    ingest.run = handler
    from poolrag.cli import main
    sys.exit(main(["ingest", "docs"]))
    """
)


def test_the_ctrl_c_line_starts_a_line_of_its_own_below_a_progress_bar() -> None:
    """The bar's line has no end while it is drawn: the line said at the Ctrl-C was glued to its
    right (``ingesting:  30%|███ | 3/10 [...]poolrag ingest: interrupted; ...``)."""
    done = subprocess.run([sys.executable, "-c", BAR], capture_output=True, text=True, timeout=45)
    assert done.returncode == 130, done.stderr
    lines = done.stderr.replace("\r", "\n").splitlines()
    assert f"poolrag ingest: interrupted; {RESUME}" in lines, done.stderr
