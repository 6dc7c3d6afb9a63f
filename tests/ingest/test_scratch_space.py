"""A run's scratch SQLite databases on a disk that fills up: one line naming ``SQLITE_TMPDIR``
and exit 4, as a full store or cache, never a traceback, and never a file left out as unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest
from disk_faults import one_line, run_poolrag, small_disk


def test_a_full_temp_folder_under_the_reading_pass_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paths of the files met go to a temporary SQLite database, which spills to SQLite's temp
    folder past its page cache: a 256 KiB one (a container's small ``/tmp``) ended the run with
    'sqlite3.OperationalError: database or disk is full' and a traceback; once that error named
    the cause, a reader took it as one unreadable file and went on without the rest. Long paths
    fill it with few files, while the progress bar's count lists them, before any is embedded."""
    deep = tmp_path / "corpus" / Path(*(f"{level}" + "d" * 240 for level in range(10)))
    deep.mkdir(parents=True)
    for i in range(1200):
        (deep / f"{i:05d}{'f' * 200}.txt").write_text(f"note {i}", encoding="utf-8")
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--collection", "c"]
    with small_disk(tmp_path / "tmp", 256 << 10) as temp:
        monkeypatch.setenv("SQLITE_TMPDIR", str(temp))
        done = run_poolrag(["ingest", str(tmp_path / "corpus"), *store, "--no-cache"], tmp_path)
    line = one_line(done.stderr)
    assert done.returncode == 4, done.stderr[-2000:]
    assert line.startswith("poolrag ingest: error: cannot write the list of files and records")
    assert "the disk is full" in line and "set SQLITE_TMPDIR" in line
