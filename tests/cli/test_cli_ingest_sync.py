"""A folder kept in sync with a collection by re-running ``poolrag ingest``, in every local store:
what each run's summary says of files deleted, renamed or emptied since the last run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolrag.cli import main

STORES = ["milvus", "qdrant", "qdrant-edge"]


def _store(kind: str, tmp_path: Path, minilm_path: Path) -> list[str]:
    pytest.importorskip({"milvus": "pymilvus", "qdrant": "qdrant_client", "qdrant-edge": "qdrant_edge"}[kind])
    where = ["--uri", str(tmp_path / "m.db")] if kind == "milvus" else ["--path", str(tmp_path / kind)]
    flags = ["--store", kind, *where, "--collection", "docs", "--model", str(minilm_path)]
    return [*flags, "--cache", str(tmp_path / "cache.sqlite"), "-q"]


def _sources(query: str, store: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["search", query, *store, "--json", "-k", "10"]) == 0
    return [Path(json.loads(line)["source"]).name for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("kind", STORES)
def test_files_deleted_or_renamed_since_the_last_run_are_named_until_prune_deletes_them(
    kind: str, tmp_path: Path, minilm_path: Path, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    """Seen from outside: after deleting tides.txt, the next run said "up to date" and nothing else,
    and search went on finding the deleted file (a renamed one twice, under both names)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tides.txt").write_text("Spring tides come when the Sun and the Moon line up.")
    (docs / "bread.md").write_text("Sourdough rises with a starter of wild yeast.")
    (docs / "rust.md").write_text("Rust's borrow checker rules out data races.")
    store = _store(kind, tmp_path, minilm_path)
    assert main(["ingest", str(docs), *store]) == 0
    (docs / "tides.txt").unlink()
    (docs / "bread.md").rename(docs / "loaf.md")
    capsys.readouterr()

    assert main(["ingest", str(docs), *store]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ingested 2 documents into {kind} collection 'docs'"), out
    assert "; 2 files gone from disk still stored (--prune deletes them); in " in out, out
    (warning,) = [r.getMessage() for r in caplog.records if "gone from disk" in r.getMessage()]
    gone = ", ".join(str((docs / name).resolve()) for name in ("bread.md", "tides.txt"))
    assert warning == (
        f"2 files stored by an earlier run are gone from disk ({gone}); their 2 chunks are still "
        "stored and found by search: run again with --prune to delete them"
    )
    assert main(["ingest", str(docs), *store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["files_gone"], report["chunks_of_files_gone"], report["deleted"]) == (2, 2, 0)
    assert sorted(_sources("tides and sourdough", store, capsys)) == [
        "bread.md",
        "loaf.md",
        "rust.md",
        "tides.txt",
    ]

    caplog.clear()
    assert main(["ingest", str(docs), *store, "--prune", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["files_gone"], report["deleted"]) == (0, 2)  # pruned: no longer stored
    assert not [r for r in caplog.records if "gone from disk" in r.getMessage()]
    assert sorted(_sources("tides and sourdough", store, capsys)) == ["loaf.md", "rust.md"]
    assert main(["ingest", str(docs), *store]) == 0
    assert capsys.readouterr().out.startswith(f"up to date: 2 documents in {kind} collection 'docs'")
    (docs / "rust.md").unlink()  # one file, one chunk: said in the singular
    assert main(["ingest", str(docs), *store]) == 0
    assert "; 1 file gone from disk still stored (--prune deletes it); in " in capsys.readouterr().out
    said = f"({(docs / 'rust.md').resolve()}); its 1 chunk is still stored and found by search: "
    assert said + "run again with --prune to delete it" in caplog.text


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


@pytest.mark.parametrize("kind", STORES)
def test_files_excluded_since_the_last_run_are_named_until_prune_deletes_them(
    kind: str, tmp_path: Path, minilm_path: Path, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    """Seen from outside: a run with ``--exclude 'drafts/'`` over a folder ingested before said
    "up to date: 1 document" and nothing else, while search went on finding the drafts."""
    docs = tmp_path / "docs"
    (docs / "drafts" / "2023").mkdir(parents=True)
    (docs / "drafts" / "2023" / "tides.txt").write_text("Spring tides come when the Sun and Moon line up.")
    (docs / "notes.log.md").write_text("Sourdough rises with a starter of wild yeast.")
    (docs / "rust.md").write_text("Rust's borrow checker rules out data races.")
    store = _store(kind, tmp_path, minilm_path)
    assert main(["ingest", str(docs), *store]) == 0
    capsys.readouterr()
    other = tmp_path / "other"  # a folder this run is not given: another run's files, not excluded
    other.mkdir()
    (other / "drafts.md").write_text("Kelp forests shelter sea otters.")
    assert main(["ingest", str(other), *store]) == 0
    capsys.readouterr()
    caplog.clear()

    exclude = ["--exclude", "drafts/", "--exclude", "*.log.md"]
    assert main(["ingest", str(docs), *store, *exclude]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ingested 1 document into {kind} collection 'docs'"), out
    assert "; 2 files excluded still stored (--prune deletes them); in " in out, out
    (warning,) = [r.getMessage() for r in caplog.records if "excluded" in r.getMessage()]
    excluded = f"{(docs / 'drafts/2023/tides.txt').resolve()}, {(docs / 'notes.log.md').resolve()}"
    assert warning == (
        f"2 files stored by an earlier run are excluded by this run's --exclude ({excluded}); their 2 "
        "chunks are still stored and found by search: run again with --prune to delete them"
    )
    assert main(["ingest", str(docs), *store, *exclude, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["files_excluded"], report["chunks_of_files_excluded"], report["files_gone"]) == (2, 2, 0)

    caplog.clear()
    assert main(["ingest", str(docs), *store, *exclude, "--prune", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["files_excluded"], report["deleted"]) == (0, 3)  # pruned, with the other folder's
    assert not [r for r in caplog.records if "excluded" in r.getMessage()]
    assert main(["ingest", str(docs), *store, *exclude]) == 0
    assert capsys.readouterr().out.startswith(f"up to date: 1 document in {kind} collection 'docs'")
