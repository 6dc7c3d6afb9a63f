"""A Qdrant local folder is data: opening one never runs code a file in it names.

qdrant-client's local mode keeps each point as a pickle in ``collection/<name>/storage.sqlite`` and
unpickles every row when it opens the folder, so a folder someone else wrote (copied, downloaded,
shared) could hold a row that runs code in the process that opens it. poolrag reads the rows first
and opens only a folder whose rows are points.
"""

from __future__ import annotations

import pickle
import sqlite3
import uuid
from pathlib import Path

import numpy as np
import pytest

from poolrag.sparse import SparseVector
from poolrag.stores import open_store
from poolrag.stores.base import ChunkRecord, CollectionSpec
from poolrag.stores.errors import UnsafeStoreFileError


class _RunsCode:
    """A pickle that, loaded, writes ``marker``: what a hostile row would do with ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def _written_store(folder: Path) -> Path:
    """A hybrid collection of three chunks written through poolrag, closed; its points file."""
    store = open_store("qdrant", "docs", path=str(folder))
    store.ensure_collection(CollectionSpec("docs", 4, "model@1", 4, sparse="bm25"))
    rows = np.eye(3, 4, dtype=np.float32)
    sparse = SparseVector.from_dict({7: 1.5, 11: 0.5})
    store.upsert(
        [
            ChunkRecord(
                str(uuid.uuid5(uuid.NAMESPACE_URL, f"c{i}")),
                row,
                {"text": f"t{i}", "n": [i, {"k": None}]},
                sparse,
            )
            for i, row in enumerate(rows)
        ]
    )
    store.close()
    return folder / "collection" / "docs" / "storage.sqlite"


def test_a_folder_poolrag_wrote_opens_and_searches(tmp_path: Path) -> None:
    _written_store(tmp_path / "q")
    store = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    try:
        hits = store.search(np.array([0, 1, 0, 0], dtype=np.float32), 1)
        assert [hit.payload["text"] for hit in hits] == ["t1"]
    finally:
        store.close()


def test_a_row_that_is_not_a_point_is_refused_before_it_runs(tmp_path: Path) -> None:
    points = _written_store(tmp_path / "q")
    marker = tmp_path / "ran"
    with sqlite3.connect(points) as db:
        db.execute("UPDATE points SET point = ? WHERE rowid = 2", (pickle.dumps(_RunsCode(marker)),))
    with pytest.raises(UnsafeStoreFileError, match=r"storage\.sqlite.*builtins\.exec"):
        open_store("qdrant", "docs", path=str(tmp_path / "q"))
    assert not marker.exists()


def test_every_collection_the_folder_lists_is_read_first(tmp_path: Path) -> None:
    """qdrant-client loads every collection in ``meta.json`` when the folder opens, whichever one
    the caller named."""
    _written_store(tmp_path / "q")
    other = open_store("qdrant", "other", path=str(tmp_path / "q"))
    other.ensure_collection(CollectionSpec("other", 4, "model@1", 4))
    other.upsert([ChunkRecord(str(uuid.uuid4()), np.ones(4, dtype=np.float32), {"text": "x"})])
    other.close()
    marker = tmp_path / "ran"
    with sqlite3.connect(tmp_path / "q" / "collection" / "other" / "storage.sqlite") as db:
        db.execute("UPDATE points SET point = ?", (pickle.dumps(_RunsCode(marker)),))
    with pytest.raises(UnsafeStoreFileError, match="other"):
        open_store("qdrant", "docs", path=str(tmp_path / "q"))
    assert not marker.exists()


@pytest.mark.parametrize(
    "replacement",
    [
        "CREATE VIEW points AS SELECT rowid AS rowid, id, point FROM kept",
        "CREATE VIRTUAL TABLE points USING fts5(id, point, content='kept')",
    ],
    ids=["view", "virtual-table"],
)
def test_points_that_are_not_a_plain_table_are_refused(tmp_path: Path, replacement: str) -> None:
    """A view computes its rows on every read (``random()`` can pick a point for this check and
    another pickle for qdrant-client's read that follows), so only the table qdrant-client creates
    is read, even when every row it shows now is a point."""
    points = _written_store(tmp_path / "q")
    with sqlite3.connect(points) as db:
        db.execute("ALTER TABLE points RENAME TO kept")
        db.execute(replacement)
    with pytest.raises(UnsafeStoreFileError, match=r"storage\.sqlite keeps its points in a"):
        open_store("qdrant", "docs", path=str(tmp_path / "q"))


def test_a_row_that_loads_as_something_else_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """A point holds no enum; a row naming one, with state for it, would set attributes on the
    process's one shared member while it is read."""
    from qdrant_client.http.models import Distance

    points = _written_store(tmp_path / "q")
    member = pickle.dumps(Distance.COSINE, protocol=4)
    state = pickle.dumps({"poolrag_test_marker": "set"}, protocol=4)
    row = member[:-1] + state[2:-1] + pickle.BUILD + pickle.STOP  # Distance.COSINE, then BUILD(state)
    with sqlite3.connect(points) as db:
        db.execute("UPDATE points SET point = ? WHERE rowid = 1", (row,))
    with pytest.raises(UnsafeStoreFileError, match=r"row 1 is not a point.*Distance"):
        open_store("qdrant", "docs", path=str(tmp_path / "q"))
    assert not hasattr(Distance.COSINE, "poolrag_test_marker")


def test_a_row_of_plain_data_is_refused(tmp_path: Path) -> None:
    points = _written_store(tmp_path / "q")
    with sqlite3.connect(points) as db:
        db.execute("UPDATE points SET point = ? WHERE rowid = 1", (pickle.dumps({"id": 1}),))
    with pytest.raises(UnsafeStoreFileError, match=r"row 1 is not a point.*holds a dict"):
        open_store("qdrant", "docs", path=str(tmp_path / "q"))
