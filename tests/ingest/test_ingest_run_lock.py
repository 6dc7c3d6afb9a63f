"""One ingest run at a time per checkpoint, across processes.

Seen from outside: the same ``poolrag ingest`` started twice into a database server (which, unlike
Milvus Lite or Qdrant local mode, lets both in) shared one checkpoint. The second took the first's
progress for an interrupted run's; finding the collection empty, it deleted the checkpoint the first
was still recording into, and whichever finished first deleted it again under the other, so a
run killed later resumed from nothing. Now the second run stops at once, naming the first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from ingest_support import byte_level_bpe

from poolrag.cli.command_errors import EXIT_UNAVAILABLE, report_error
from poolrag.ingest import Document, IngestPipeline, TokenChunker
from poolrag.ingest.checkpoint import checkpointed
from poolrag.ingest.driver import IngestDriver, VectorSourceFacts
from poolrag.ingest.run_lock import IngestRunningError, run_lock_path
from poolrag.stores import InMemoryStore
from poolrag.stores.errors import StoreUnavailableError

FACTS = VectorSourceFacts("dense", 8, 8, "m@0123456789abcdef", "m", "embedding")

#: A run that records two documents done, says so, and waits (on its stdin) mid-run.
HOLDER = textwrap.dedent(
    """
    import sys
    from poolrag.ingest.driver import IngestDriver, VectorSourceFacts
    from poolrag.stores import InMemoryStore

    facts = VectorSourceFacts("dense", 8, 8, "m@0123456789abcdef", "m", "embedding")
    driver = IngestDriver(InMemoryStore("docs"), facts, (32, 4), checkpoint_path=sys.argv[1])
    driver.start()
    driver.checkpoint.mark_done({"a.md": "done-a", "b.md": "done-b"})
    print("running", flush=True)
    sys.stdin.readline()
    """
)


def _driver(checkpoint: Path) -> IngestDriver:
    return IngestDriver(InMemoryStore("docs"), FACTS, (32, 4), checkpoint_path=checkpoint)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A run in another process, mid-way through, recording into ``tmp_path / "ck.sqlite"``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "ck.sqlite")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "running\n", "the holder did not start its run"
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_second_run_on_the_same_checkpoint_is_refused_and_the_first_loses_nothing(
    tmp_path: Path, running: subprocess.Popen[str], capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = tmp_path / "ck.sqlite"
    second = _driver(checkpoint)
    with pytest.raises(IngestRunningError) as refused:
        second.start()
    message = str(refused.value)
    assert f"held by pid {running.pid}" in message
    assert "another ingest into memory" in message and "collection docs" in message
    assert str(checkpoint) in message and "--checkpoint FILE" in message
    # the first run's progress is where it left it
    assert checkpointed(checkpoint) == {"a.md": "done-a", "b.md": "done-b"}
    # the CLI: one line, exit 3 as for a store another process holds
    assert report_error("ingest", refused.value) == EXIT_UNAVAILABLE
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_killed_run_locks_no_one_out(tmp_path: Path, running: subprocess.Popen[str]) -> None:
    checkpoint = tmp_path / "ck.sqlite"
    running.send_signal(signal.SIGKILL)
    running.wait(timeout=30)
    assert run_lock_path(checkpoint).exists()  # left by the kill, held by no one
    assert checkpointed(checkpoint) == {"a.md": "done-a", "b.md": "done-b"}
    resumed = _driver(checkpoint)
    resumed.start()
    try:
        with pytest.raises(IngestRunningError, match=f"held by pid {os.getpid()} \\(this process\\)"):
            _driver(checkpoint).start()
    finally:
        resumed.close()


def test_runs_one_after_the_other_in_one_process_each_get_in(tmp_path: Path) -> None:
    """A run that failed (closed without finishing) and one that finished let the next one in,
    and a finished run leaves no lock file behind."""
    checkpoint = tmp_path / "ck.sqlite"
    failed = _driver(checkpoint)
    failed.start()
    with pytest.raises(IngestRunningError):  # two at once in one process are refused too
        _driver(checkpoint).start()
    failed.close()
    finished = _driver(checkpoint)
    finished.start()
    finished.finish()
    assert not run_lock_path(checkpoint).exists()
    again = _driver(checkpoint)
    again.start()
    again.close()


class _DownAtTheEnd(InMemoryStore):
    """A database that goes away as the run ends (its optimize call fails)."""

    def optimize(self) -> None:
        raise StoreUnavailableError("memory is unavailable: the database went away")


def test_a_run_that_fails_at_its_end_lets_the_next_one_in(tmp_path: Path) -> None:
    """A notebook retrying after a database outage, with the same pipeline or a new one, is not
    told its own earlier run still holds the checkpoint."""
    checkpoint = tmp_path / "ck.sqlite"
    failed = IngestDriver(_DownAtTheEnd("docs"), FACTS, (32, 4), checkpoint_path=checkpoint)
    failed.start()
    with pytest.raises(StoreUnavailableError):
        failed.finish()
    retried = _driver(checkpoint)
    retried.start()
    retried.close()
    failed.start()  # the same driver again
    failed.close()


#: A platform without fcntl (Windows): the ingest modules import, a run starts and finishes, and the
#: CLI's error report (which names the refusal's class) still answers.
WITHOUT_FCNTL = textwrap.dedent(
    """
    import sys
    sys.modules["fcntl"] = None  # what "import fcntl" meets on Windows: ModuleNotFoundError
    from poolrag.cli.command_errors import EXIT_BAD_INPUT, report_error
    from poolrag.ingest import IngestPipeline
    from poolrag.ingest.driver import IngestDriver, VectorSourceFacts
    from poolrag.stores import InMemoryStore

    facts = VectorSourceFacts("dense", 8, 8, "m@0123456789abcdef", "m", "embedding")
    for _ in range(2):
        driver = IngestDriver(InMemoryStore("docs"), facts, (32, 4), checkpoint_path=sys.argv[1])
        driver.start()
        driver.finish()
    assert report_error("ingest", ValueError("bad")) == EXIT_BAD_INPUT
    print("ran", flush=True)
    """
)


def test_a_platform_without_flock_runs_unguarded_rather_than_failing_to_import(tmp_path: Path) -> None:
    """Windows has no fcntl: importing ``poolrag.ingest`` failed there, and so did the CLI's
    report of any error, which looks for the run lock's refusal."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_FCNTL, str(tmp_path / "ck.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr[-2000:]
    assert not run_lock_path(tmp_path / "ck.sqlite").exists()


class _NeverAsked:
    """An encoder the runs below fail before asking."""

    layout, dimension, full_dimension = "dense", 8, 8
    model_identity, model_name, model_outputs = "m@0123456789abcdef", "m", "embedding"
    computed = 0

    def encode(self, texts: object, token_ids: object = None) -> list[np.ndarray]:
        raise AssertionError("not reached")


class _Uncountable(list):  # type: ignore[type-arg]
    """Documents whose count fails (a lazily counted source), as the pipeline sizes its bar."""

    def __len__(self) -> int:
        raise TypeError("this source is counted as it is read")


def test_a_pipeline_run_that_fails_as_it_sets_up_lets_the_next_one_in(tmp_path: Path) -> None:
    """Whatever fails after the run took its lock (here the documents' count, before any batch),
    a new pipeline in the same process is not told the failed run still holds the checkpoint."""
    checkpoint = tmp_path / "ck.sqlite"
    chunker = TokenChunker(byte_level_bpe("notes on owls and comets " * 20, 300), max_tokens=32, overlap=4)

    def pipeline() -> IngestPipeline:
        return IngestPipeline(
            InMemoryStore("docs"), _NeverAsked(), chunker, checkpoint_path=checkpoint, progress=False
        )

    failed = pipeline()  # kept, as a notebook keeps it
    with pytest.raises(TypeError, match="counted as it is read"):
        failed.run(_Uncountable([Document("a.md", "owls")]))
    assert pipeline().run([]).upserted == 0  # refused with IngestRunningError while the lock leaked
    assert not run_lock_path(checkpoint).exists()
