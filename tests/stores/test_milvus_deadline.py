"""The deadline Milvus writes carry: 300 s for a Milvus Lite file, 10 s for a server.

Milvus Lite runs its flushes and merges inside this process, under the lock a write waits on, so a
write into a big file can wait well past a server's deadline without anything being wrong; a server
that does not answer in 10 s is down. The deadline is read off the real client's upsert calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from poolrag.stores import ChunkRecord, CollectionSpec, open_store
from poolrag.stores.milvus import LITE_DEADLINE_S, SERVER_DEADLINE_S
from poolrag.testing.store_internals import milvus_client

SPEC = CollectionSpec(name="docs", dimension=8, model_identity="tiny@1", full_dimension=8, model_name="tiny")


def _deadlines_of_upserts(uri: str) -> list[float | None]:
    """Store three chunks through a real store at ``uri``; the ``timeout`` each upsert carried."""
    store = open_store("milvus", "docs", uri=uri)
    client = milvus_client(store)
    upsert = client.upsert
    carried: list[float | None] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        carried.append(kwargs.get("timeout"))
        return upsert(*args, **kwargs)

    client.upsert = recording
    try:
        store.ensure_collection(SPEC)
        vectors = np.eye(3, 8, dtype=np.float32)
        store.upsert(
            [ChunkRecord(f"c{i}", vectors[i], {"text": f"text {i}", "source": "a.txt"}) for i in range(3)]
        )
        assert store.count() == 3  # the calls went through to the real database
    finally:
        store.close()
    return carried


def test_a_milvus_lite_file_gives_its_writes_the_long_deadline(tmp_path: Path) -> None:
    carried = _deadlines_of_upserts(str(tmp_path / "docs.db"))
    assert carried and set(carried) == {LITE_DEADLINE_S}
    assert LITE_DEADLINE_S >= 300


def test_a_milvus_server_keeps_the_short_deadline(milvus_server_uri: str) -> None:
    carried = _deadlines_of_upserts(milvus_server_uri)
    assert carried and set(carried) == {SERVER_DEADLINE_S}
    assert SERVER_DEADLINE_S <= 10
