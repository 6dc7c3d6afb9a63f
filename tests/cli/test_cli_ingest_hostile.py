"""Issue 27, items 3 and 4: hostile input costs only itself. A record no model can read is skipped
with one line naming its file and line, and the records and files after it are stored; a file
whose few tokens span a megabyte (one letter and 500,000 combining accents) is cut into chunks
bounded in bytes, so Milvus Lite and Qdrant local mode store the same rows and the run exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.stores import open_store

RECORDS = [
    {"id": "first", "text": "Honeybee foragers tell their sisters where flowers are."},
    {"id": "sur", "text": "lone \ud800 surrogate escape"},
    {"id": "bidi", "text": "\u202e\u202c\u200f"},
    {"id": "last", "text": "Spring tides come when the Sun and the Moon line up."},
]


def _corpus(root: Path) -> Path:
    root.mkdir()
    with (root / "records.jsonl").open("w") as handle:
        for record in RECORDS:
            handle.write(json.dumps(record) + "\n")  # ASCII escapes: the surrogate stays one
    (root / "accents.txt").write_text("a" + "\u0301" * 500_000 + " and then some words.")
    (root / "zz_after.md").write_text("# Sourdough\n\nA starter of wild yeast raises the dough.")
    return root


def _ingest(corpus: Path, store: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(home / "cache")}
    options = ["--collection", "c", "--no-cache", "--quiet", "--json"]
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", "ingest", str(corpus), *store, *options],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess, dict]]:
    """One real ``poolrag ingest`` of the same folder into each store: (process, id -> payload)."""
    home = tmp_path_factory.mktemp("hostile")
    corpus = _corpus(home / "corpus")
    locations = {"milvus": {"uri": str(home / "m.db")}, "qdrant": {"path": str(home / "q")}}
    out = {}
    for kind, location in locations.items():
        flag, value = next(iter(location.items()))
        done = _ingest(corpus, ["--store", kind, f"--{flag}", value], home)
        store = open_store(kind, "c", **location)
        try:
            rows = store.list_sources()
        finally:
            store.close()
        out[kind] = (done, rows)
    return out


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_a_bad_record_is_skipped_and_everything_after_it_is_stored(runs, kind: str) -> None:
    done, rows = runs[kind]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    sources = {source.rsplit("/", 1)[-1] for source in rows.values()}
    assert {"records.jsonl#first", "records.jsonl#last", "accents.txt", "zz_after.md"} <= sources
    assert not {"records.jsonl#sur", "records.jsonl#bidi"} & sources
    named = [line for line in done.stderr.splitlines() if "records.jsonl:2" in line]
    assert len(named) == 2, done.stderr  # the warning as it happens, the summary line at the end
    assert all("lone surrogate" in line for line in named)
    assert any("records.jsonl:3" in line and "is empty" in line for line in done.stderr.splitlines())
    assert len(json.loads(done.stdout)["skipped"]) == 2


def test_both_stores_keep_the_same_rows(runs) -> None:
    (milvus_run, milvus_rows), (qdrant_run, qdrant_rows) = runs["milvus"], runs["qdrant"]
    assert milvus_run.returncode == qdrant_run.returncode == 0
    assert milvus_rows == qdrant_rows
    accents = [cid for cid, source in milvus_rows.items() if source.endswith("accents.txt")]
    assert len(accents) > 1  # the megabyte was cut into chunks, not stored (or refused) as one
