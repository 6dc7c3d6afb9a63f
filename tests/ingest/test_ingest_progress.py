"""Ingest's one progress bar: it starts at the run's total (counted before the run) and ends there,
counting documents as they are stored, found done or left out; a run whose total is unknown draws
none (no "ingesting: 0doc" counter), and ``-q`` none at all."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from ingest_support import TOPICS, write_corpus

from poolrag.cache import CachedEmbedder
from poolrag.cli import main
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.readers import SkippedFile, count_documents
from poolrag.stores import open_store


def _drawn(stderr: str) -> list[tuple[int, int | None]]:
    """``(count, total)`` of every state the ingest bar drew (total ``None`` for a bare counter)."""
    states = []
    for line in stderr.replace("\r", "\n").splitlines():
        if match := re.search(r"ingesting: .*?\b(\d+)/(\d+)\b", line):
            states.append((int(match.group(1)), int(match.group(2))))
        elif match := re.search(r"ingesting: (\d+)doc", line):
            states.append((int(match.group(1)), None))
    return states


def _corpus_with_problems(root: Path) -> Path:
    """Text files, a JSONL file with good, blank, broken and repeated records, a file that is not
    UTF-8, a second name for a file already listed and a broken link."""
    corpus = write_corpus(root)
    (corpus / "again.md").symlink_to("bees.md")
    (corpus / "gone.md").symlink_to("nowhere.md")
    (corpus / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    records = [
        '{"id": "a", "text": "Owls hunt at night."}',
        "",
        '{"id": "b", "text": "Foxes dig dens."}',
        "{not json",
        '{"id": "a", "text": "A repeat of a."}',
        '{"text": "No id: named by its line."}',
    ]
    (corpus / "notes.jsonl").write_text("\n".join(records) + "\n")
    return corpus


def test_the_count_is_what_read_paths_gives(tmp_path: Path) -> None:
    corpus = _corpus_with_problems(tmp_path / "corpus")
    skipped: list[SkippedFile] = []
    documents = list(read_paths([corpus, corpus / "bees.md"], skipped=skipped))
    assert len(documents) == len(TOPICS) + 3 and len(skipped) == 4  # latin1, gone, broken JSON, repeat
    assert count_documents([corpus, corpus / "bees.md"]) == len(documents) + len(skipped)


@pytest.fixture
def pipeline(tmp_path: Path, minilm_engine) -> Iterator[IngestPipeline]:
    store = open_store("qdrant", "docs", path=str(tmp_path / "qdrant"))
    yield IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(minilm_engine, None)),
        TokenChunker(minilm_engine.tokenizer, max_tokens=24, overlap=4),
        batch_size=4,
        checkpoint_dir=tmp_path / "ck",
    )
    store.close()


def test_the_bar_starts_at_the_total_and_ends_there(
    pipeline: IngestPipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _corpus_with_problems(tmp_path / "corpus")
    total = count_documents([corpus])
    for run in ("first", "again: every document found done"):
        skipped: list[SkippedFile] = []
        report = pipeline.run(read_paths([corpus], skipped=skipped), skipped=skipped, total=total)
        drawn = _drawn(capsys.readouterr().err)
        assert drawn[0] == (0, total) and drawn[-1] == (total, total), (run, drawn)
        assert all(t == total for _, t in drawn) and [n for n, _ in drawn] == sorted(n for n, _ in drawn)
        assert report.documents + len(report.skipped) == total


def test_the_bar_counts_the_chunks_stored_while_one_long_document_is_read(
    pipeline: IngestPipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One long file is one document: the bar read 0/1 for minutes (seen from outside), so it also
    says how many chunks are stored so far, growing batch by batch."""
    long = tmp_path / "long.txt"
    long.write_text(
        " ".join(f"Sentence {i} about bees, flowers and the dances that point at them." for i in range(80))
    )
    report = pipeline.run(read_paths([long]), total=1)
    err = capsys.readouterr().err.replace("\r", "\n")
    counts = [int(n) for n in re.findall(r"ingesting: +0%.*?(\d+) chunks stored", err)]
    assert len(counts) >= 2 and counts == sorted(counts), err[-2000:]  # while the one document is read
    last = err.rstrip().splitlines()[-1]
    assert "1/1 [" in last and last.endswith(f", {report.upserted} chunks stored]"), last


def test_a_sized_list_is_its_own_total_and_an_unknown_total_draws_nothing(
    pipeline: IngestPipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    documents = list(read_paths([corpus]))
    pipeline.run(documents)
    drawn = _drawn(capsys.readouterr().err)
    assert drawn[0] == (0, len(TOPICS)) and drawn[-1] == (len(TOPICS), len(TOPICS))
    pipeline.run(iter(documents))  # a generator: how far along it is cannot be said
    pipeline.run([])  # nothing to do: no "ingesting: 0doc" either
    assert "ingesting" not in capsys.readouterr().err
    pipeline.progress = False
    pipeline.run(documents, total=len(documents))
    assert "ingesting" not in capsys.readouterr().err


def test_poolrag_ingest_draws_one_bar_from_its_total_and_none_with_quiet(
    tmp_path: Path, minilm_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    corpus = _corpus_with_problems(tmp_path / "corpus")
    total = len(TOPICS) + 3 + 4  # documents and left-out entries (the test above counts them)
    common = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--model", str(minilm_path)]
    assert main(["ingest", str(corpus), *common]) == 0
    err = capsys.readouterr().err
    drawn = _drawn(err)
    assert drawn[0] == (0, total) and drawn[-1] == (total, total), drawn
    assert "4 left out" in err
    assert main(["ingest", str(corpus), *common, "-q"]) == 0
    assert _drawn(capsys.readouterr().err) == []
