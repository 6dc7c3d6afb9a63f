"""A folder kept in sync with a collection by re-running ``poolrag ingest``, in every local store:
what each run's summary says of files emptied since the last run."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from poolrag.cli import main

STORES = ["milvus", "qdrant", "qdrant-edge"]


@pytest.fixture(autouse=True)
def _drop_cli_log_handlers():
    """``main`` sets up logging on stderr, which pytest swaps per test: drop what it added."""
    before = list(logging.root.handlers)
    yield
    for handler in [h for h in logging.root.handlers if h not in before]:
        logging.root.removeHandler(handler)


def _store(kind: str, tmp_path: Path, minilm_path: Path) -> list[str]:
    pytest.importorskip({"milvus": "pymilvus", "qdrant": "qdrant_client", "qdrant-edge": "qdrant_edge"}[kind])
    where = ["--uri", str(tmp_path / "m.db")] if kind == "milvus" else ["--path", str(tmp_path / kind)]
    flags = ["--store", kind, *where, "--collection", "docs", "--model", str(minilm_path)]
    return [*flags, "--cache", str(tmp_path / "cache.sqlite"), "-q"]


@pytest.mark.parametrize("kind", STORES)
def test_empty_files_are_named_but_not_counted_as_documents(
    kind: str, tmp_path: Path, minilm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen from outside: a folder of one note, an empty file and a whitespace-only one "ingested 3
    documents ... 1 chunk"; and a run after the note was emptied "ingested 1 document ... 0 chunks"."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.txt").write_text("Coral reefs bleach when the water warms.")
    (docs / "empty.txt").write_text("")
    (docs / "blank.md").write_text("  \n\n\t\n")
    store = _store(kind, tmp_path, minilm_path)
    assert main(["ingest", str(docs), *store]) == 0
    assert capsys.readouterr().out.startswith(f"ingested 1 document into {kind} collection 'docs': 1 chunk:")
    assert main(["ingest", str(docs), *store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["documents"], report["documents_without_text"], report["chunks"]) == (1, 2, 1)
    assert main(["ingest", str(docs), *store]) == 0
    assert capsys.readouterr().out.startswith(f"up to date: 1 document in {kind} collection 'docs'")

    (docs / "note.txt").write_text("")  # emptied: its chunk goes, and nothing is left to store
    assert main(["ingest", str(docs), *store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["documents"], report["documents_without_text"], report["deleted"]) == (0, 3, 1)
    assert main(["ingest", str(docs), *store]) == 0
    assert capsys.readouterr().out.startswith(f"nothing to store: 3 documents with no text in {kind}")
