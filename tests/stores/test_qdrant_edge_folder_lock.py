"""A Qdrant Edge shard is open in one process at a time.

Seen from outside: a ``poolrag search`` started beside a running ingest on the same ``--path``
was refused, and the ingest then died with Qdrant's "tracker journal is shorter than expected":
the second opener had touched the shard's files before the shard's own lock refused it. Now the
second opener is refused before it reads a file, as an unavailable store (retried, then one line),
and the first process goes on writing and closes with every point in place. A killed holder leaves
no lock behind (the kernel drops it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from poolrag.stores import ChunkRecord, CollectionSpec, open_store
from poolrag.stores.errors import StoreUnavailableError
from poolrag.stores.retry import RetryPolicy

WIDTH = 8
ONE_TRY = RetryPolicy(attempts=1)

HOLDER = textwrap.dedent(
    """
    import os
    import sys
    import numpy as np
    from poolrag.stores import ChunkRecord, CollectionSpec, open_store

    folder, mode = sys.argv[1], sys.argv[2]
    store = open_store("qdrant-edge", "c", path=folder)
    store.ensure_collection(CollectionSpec(name="c", dimension=8, model_identity="m@1", full_dimension=8))
    rng = np.random.default_rng(0)

    def batch(start):
        return [
            ChunkRecord(
                f"{i:032x}",
                rng.standard_normal(8).astype(np.float32),
                {"text": "words " * int(rng.integers(5, 200)), "source": f"{i % 7}.txt"},
            )
            for i in range(start, start + 50)
        ]

    store.upsert(batch(0))
    print("held", flush=True)
    if mode == "write":  # an ingest going on until the test has opened the shard from outside
        start = 50
        while start < 500 or not os.path.exists(os.path.join(folder, "stop")):
            store.upsert(batch(start % 2000))
            start += 50
    else:
        sys.stdin.readline()
    print(store.count(), flush=True)
    store.close()
    """
)


def _holder(path: Path, mode: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_process_is_refused_and_the_first_keeps_writing(tmp_path: Path) -> None:
    holder = _holder(tmp_path, "write")
    try:
        for _ in range(10):  # searches started while the writes go on
            with pytest.raises(StoreUnavailableError) as refused:
                open_store("qdrant-edge", "c", path=str(tmp_path), retry=ONE_TRY)
        (tmp_path / "stop").touch()
        written, errors = holder.communicate(timeout=120)
        assert holder.returncode == 0, errors[-3000:]  # its writes were never disturbed
    finally:
        holder.kill()
    assert "open in another process" in str(refused.value)  # refused before any shard file is read
    store = open_store("qdrant-edge", "c", path=str(tmp_path))
    try:
        assert store.count() == int(written) >= 500
    finally:
        store.close()


def test_a_killed_holder_leaves_no_lock(tmp_path: Path) -> None:
    holder = _holder(tmp_path, "wait")
    holder.kill()
    holder.wait(timeout=30)
    store = open_store("qdrant-edge", "c", path=str(tmp_path), retry=ONE_TRY)
    try:
        assert store.count() == 50  # the batch written before the kill
        store.upsert(
            [ChunkRecord("f" * 32, np.ones(WIDTH, dtype=np.float32), {"text": "t", "source": "b.txt"})]
        )
        assert store.count() == 51
    finally:
        store.close()


def test_a_closed_store_lets_the_next_opener_in(tmp_path: Path) -> None:
    spec = CollectionSpec(name="c", dimension=WIDTH, model_identity="m@1", full_dimension=WIDTH)
    first = open_store("qdrant-edge", "c", path=str(tmp_path))
    first.ensure_collection(spec)
    first.close()
    open_store("qdrant-edge", "c", path=str(tmp_path), retry=ONE_TRY).close()


def test_a_shard_that_fails_to_load_leaves_its_folder_free(tmp_path: Path, monkeypatch) -> None:
    import qdrant_edge

    spec = CollectionSpec(name="c", dimension=WIDTH, model_identity="m@1", full_dimension=WIDTH)
    with open_store("qdrant-edge", "c", path=str(tmp_path)) as store:
        store.ensure_collection(spec)

    def broken(path: str) -> object:
        raise RuntimeError("Service runtime error: a damaged segment")

    monkeypatch.setattr(qdrant_edge.EdgeShard, "load", staticmethod(broken))
    with pytest.raises(RuntimeError, match="damaged segment"):
        open_store("qdrant-edge", "c", path=str(tmp_path), retry=ONE_TRY)
    monkeypatch.undo()
    with open_store("qdrant-edge", "c", path=str(tmp_path), retry=ONE_TRY) as again:  # not "in use"
        assert again.count() == 0


def test_a_store_opened_before_another_process_created_the_collection(tmp_path: Path) -> None:
    """Two first ``poolrag ingest --store qdrant-edge`` runs started together: each opened its store
    while the folder was empty, one created the shard, and the other then found ``poolrag.json`` but
    had no shard open, so it died with ``AttributeError: 'NoneType' object has no attribute
    'scroll'`` (measured). It must be refused while the creator holds the shard, and use the shard
    once the creator has closed it."""
    spec = CollectionSpec(name="c", dimension=WIDTH, model_identity="m@1", full_dimension=WIDTH)
    late = open_store("qdrant-edge", "c", path=str(tmp_path), retry=ONE_TRY)  # nothing there yet
    holder = _holder(tmp_path, "wait")  # creates the collection and holds it
    try:
        with pytest.raises(StoreUnavailableError, match="open in another process"):
            late.ensure_collection(spec)
        written, errors = holder.communicate("\n", timeout=120)
        assert holder.returncode == 0, errors[-3000:]
    finally:
        holder.kill()
    assert late.ensure_collection(spec) == spec
    late.upsert([ChunkRecord("f" * 32, np.ones(WIDTH, dtype=np.float32), {"text": "t", "source": "b.txt"})])
    assert late.count() == int(written) + 1 == 51
    late.close()
