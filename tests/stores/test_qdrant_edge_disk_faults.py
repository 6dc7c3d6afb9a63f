"""Issue 47 item 3: a qdrant-edge shard's disk and permission faults are one line, as Milvus Lite's
and Qdrant local's are.

The shard writes through memory maps, so a full disk killed ``poolrag ingest`` with SIGBUS (exit
135, no message) and its resume, which maps and fills ~32 MiB of vector chunks when it loads the
shard, died the same way. Now free space is checked before the shard is loaded and before each
write: one line, exit code 4, the checkpoint intact, and the run resumes once there is room. A
read-only folder is one line (exit 2, as for the other stores), not a traceback about the WAL.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from disk_faults import empty_filler, fill_to, free_bytes, one_line, read_only_view, run_poolrag, small_disk
from kill_resume import SUBJECTS, write_subject_corpus

from poolrag import PoolingParams
from poolrag.ingest import TokenChunker, read_paths
from poolrag.ingest.checkpoint import checkpointed
from poolrag.stores import open_store
from poolrag.stores.edge_disk_space import HEADROOM_BYTES, unbacked_bytes

FIRST_HALF = len(SUBJECTS) // 2


def _ingest(paths: list[Path], store: Path, checkpoint: Path, home: Path):
    args = ["ingest", *map(str, paths), "--store", "qdrant-edge", "--path", str(store), "--collection", "c"]
    args += ["--chunk-tokens", "32", "--overlap", "4", "--batch-size", "2", "--no-cache"]
    return run_poolrag([*args, "--checkpoint", str(checkpoint), "--quiet", "--json"], home)


def _done(checkpoint: Path) -> list[str]:
    return list(checkpointed(checkpoint))


def _assert_disk_full(run, store: Path) -> None:
    assert run.returncode == 4, (run.returncode, run.stderr[-3000:])  # was -7 (SIGBUS), no message
    line = one_line(run.stderr)
    assert line.startswith("poolrag ingest: error: cannot write the Qdrant Edge shard"), line
    assert str(store) in line and "the disk is full" in line, line


def test_a_full_disk_under_a_shard_is_one_line_and_the_run_resumes(tmp_path: Path, minilm_engine) -> None:
    corpus = write_subject_corpus(tmp_path / "corpus")
    files = sorted(corpus.iterdir())
    checkpoint = tmp_path / "ingest.checkpoint.json"
    with small_disk(tmp_path / "disk", 96 << 20) as disk:
        store = disk / "edge"
        first = _ingest(files[:FIRST_HALF], store, checkpoint, tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        shard = store / "c" / "shard"

        # Too little room to load the shard (the resume's ~32 MiB): refused before it is mapped.
        fill_to(disk, 1 << 20)
        refused = _ingest([corpus], store, checkpoint, tmp_path)
        _assert_disk_full(refused, store)
        assert "loading the shard" in refused.stderr
        assert not checkpoint.exists()  # nothing was started, nothing half-recorded

        # Room to load and for a few batches: the run stops between two writes.
        empty_filler(disk)
        fill_to(disk, unbacked_bytes(shard) + HEADROOM_BYTES + (36 << 10))  # about three documents' worth
        stopped = _ingest([corpus], store, checkpoint, tmp_path)
        _assert_disk_full(stopped, store)
        done = _done(checkpoint)  # readable, and lists what the store acknowledged
        assert FIRST_HALF < len(done) < len(files), len(done)
        assert free_bytes(disk) > 0

        empty_filler(disk)
        resumed = _ingest([corpus], store, checkpoint, tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        report = json.loads(resumed.stdout)
        assert report["resumed"] and report["documents_skipped"] == len(done)
        assert not checkpoint.exists()

        chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
        chunks = [c for doc in read_paths([corpus]) for c in chunker.split(doc)]
        with open_store("qdrant-edge", "c", path=str(store)) as edge:
            assert edge.count() == len(chunks)  # nothing lost, nothing twice
            assert set(edge.list_sources()) == {c.id for c in chunks}
            stored = edge.fetch_vectors([c.id for c in chunks])
    clean = minilm_engine.embed_array([c.text for c in chunks], PoolingParams(input_type="document"))
    np.testing.assert_allclose(np.stack([stored[c.id] for c in chunks]), clean, atol=1e-5)


@pytest.mark.parametrize("read_only", ["store folder", "shard folder"])
def test_a_read_only_shard_is_one_line_and_loses_nothing(tmp_path: Path, read_only: str) -> None:
    """The whole store seen through a read-only mount, or only the shard's own folder read-only
    (what a user's permissions do to root's files; the shard's log failed there with a traceback
    about WAL permission denied): ingest and search refuse in one line naming the folder."""
    corpus = write_subject_corpus(tmp_path / "corpus")
    files = sorted(corpus.iterdir())
    store = tmp_path / "edge"
    checkpoint = tmp_path / "ingest.checkpoint.json"
    first = _ingest(files[:2], store, checkpoint, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    with open_store("qdrant-edge", "c", path=str(store)) as edge:
        stored_before = edge.count()

    shard = store / "c" / "shard"
    source, view = (store, tmp_path / "read-only") if read_only == "store folder" else (shard, shard)
    location = view if read_only == "store folder" else store
    with read_only_view(source, view):
        refused = _ingest(files[:3], location, checkpoint, tmp_path)
        search = run_poolrag(
            ["search", "volcanoes", "--store", "qdrant-edge", "--path", str(location), "--collection", "c"],
            tmp_path,
        )
    for run, command in ((refused, "ingest"), (search, "search")):
        assert run.returncode == 2, (command, run.stderr[-3000:])
        line = one_line(run.stderr)
        assert line.startswith(f"poolrag {command}: error: cannot write the Qdrant Edge shard"), line
        assert str(view) in line and "Read-only file system" in line, line
        assert "writes its folder even to search" in line, line  # a search is refused too: why

    with open_store("qdrant-edge", "c", path=str(store)) as edge:  # untouched, and opens writable
        assert edge.count() == stored_before > 0
