"""StoredIds: the ids a collection held when a run started, in a scratch SQLite file, not in memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.ingest.stored_ids import StoredIds

PAIRS = [("a1", "a.md"), ("a2", "a.md"), ("b1", "b.md"), ("c1", "dir/c.md"), ("d1", "d.jsonl#7")]


def _ledger(tmp_path: Path, pairs=PAIRS) -> StoredIds:
    ledger = StoredIds.beside(tmp_path / "run.json")

    def scan(consume) -> None:
        consume(pairs[:3])
        consume(pairs[:2])  # a scan retried after a dropped connection hands pairs over again
        consume(pairs[2:])

    ledger.fill(scan)
    return ledger


def test_kept_stale_and_orphans(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    try:
        ledger.see("a.md")
        assert ledger.keep("a1") and not ledger.keep("new-chunk")
        assert ledger.stale("a.md") == ["a2"] and ledger.stale("b.md") == ["b1"]
        ledger.see("b.md")
        pages = list(ledger.orphans(lambda source: source.startswith("d.jsonl#")))
        assert [cid for page in pages for cid in page] == ["c1"]
    finally:
        ledger.close()


def test_a_source_seen_twice_is_refused(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    try:
        ledger.see("a.md")
        with pytest.raises(InvalidInputError, match=r"two documents share the source 'a\.md'"):
            ledger.see("a.md")
    finally:
        ledger.close()


def test_orphans_come_in_bounded_pages(tmp_path: Path) -> None:
    pairs = [(f"id{i:05d}", f"gone-{i}.md") for i in range(2500)]
    ledger = _ledger(tmp_path, pairs)
    try:
        pages = list(ledger.orphans(lambda source: False))
        assert max(len(p) for p in pages) <= 1000 and sorted(c for p in pages for c in p) == [
            c for c, _ in pairs
        ]
    finally:
        ledger.close()


def test_an_empty_collection_answers_without_queries(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, [])
    try:
        assert not ledger.keep("x") and ledger.stale("a.md") == []
    finally:
        ledger.close()


def test_the_file_is_scratch(tmp_path: Path) -> None:
    """Removed at close; one left by a killed run (its process gone) is removed by the next run,
    one of a live run is not."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    leftover = tmp_path / f".run.json.{int(dead.stdout)}.stored-ids.sqlite"
    leftover.write_bytes(b"")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = tmp_path / f".run.json.{live.pid}.stored-ids.sqlite"
        running.write_bytes(b"")
        ledger = _ledger(tmp_path)
        assert ledger.path.exists() and not leftover.exists() and running.exists()
        ledger.close()
        assert not ledger.path.exists()
    finally:
        live.kill()
        live.wait()


def test_a_stored_chunk_with_other_fields_is_kept_but_written_again(tmp_path: Path) -> None:
    """A chunk stored with the payload this run makes is skipped; one stored with other fields is not
    stale (the same id is written over) but is written again; one whose payload the store did not
    hand over (:meth:`StoredIds.fill`) is taken as it is."""
    ledger = StoredIds.beside(tmp_path / "run.json")
    payloads = [
        ("a1", {"source": "a.md", "title": "Old", "start": 0}),
        ("a2", {"source": "a.md", "title": "Old", "start": 9, "big": 2**64 - 1, "f": 1.0}),
    ]
    ledger.fill_payloads(lambda consume: consume(payloads))
    try:
        ledger.see("a.md")
        assert not ledger.keep("a1", {"source": "a.md", "title": "New", "start": 0, "text": "x"})
        assert ledger.keep("a2", {"source": "a.md", "title": "Old", "start": 9, "big": 2**64 - 1, "f": 1})
        assert ledger.stale("a.md") == []
    finally:
        ledger.close()
    legacy = _ledger(tmp_path)
    try:
        assert legacy.keep("a1", {"source": "a.md", "title": "anything"})
    finally:
        legacy.close()
