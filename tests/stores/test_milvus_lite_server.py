"""A Milvus Lite file is free for another process once poolrag's last store on it closes.

Milvus Lite runs inside the process that opens a ``.db`` path and locks the database until its
server stops; pymilvus stops it only at exit. A notebook that ingested and closed its store must not
keep ``poolrag search`` in a shell out of the file, and closing a poolrag store must not stop a
server that another store or another pymilvus client in the process still uses. Everything runs on
real Milvus Lite files and, for the other process, a real second Python process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from poolrag.stores import ChunkRecord, CollectionSpec, VectorStore, open_store

# Opens the database in a process of its own and prints its collections; exits non-zero if it cannot.
_OTHER_PROCESS = """
import sys
from pymilvus import MilvusClient
print(sorted(MilvusClient(uri=sys.argv[1], timeout=10).list_collections()))
"""


def _other_process_opens(database: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, str(database)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fill(store: VectorStore) -> None:
    spec = CollectionSpec(name="docs", dimension=4, model_identity="tiny@1", full_dimension=4)
    store.ensure_collection(spec)
    vectors = np.eye(4, dtype=np.float32)
    store.upsert([ChunkRecord(f"c{i}", vectors[i], {"text": f"chunk {i}"}) for i in range(4)])


def _assert_rows_found(store: VectorStore) -> None:
    """The four rows ``_fill`` wrote are there, and a search finds each by its own vector."""
    try:
        assert store.count() == 4
        found = [store.search(v, limit=1)[0].id for v in np.eye(4, dtype=np.float32)]
        assert found == ["c0", "c1", "c2", "c3"]
    finally:
        store.close()


def test_after_the_last_store_closes_another_process_opens_the_file(tmp_path: Path) -> None:
    database = tmp_path / "notebook.db"
    store = open_store("milvus", "docs", uri=str(database))
    _fill(store)
    store.close()

    other = _other_process_opens(database)

    assert other.returncode == 0, other.stderr[-2000:]
    assert other.stdout.strip() == "['docs']"


def test_a_closed_file_reopens_in_the_same_process_with_its_rows(tmp_path: Path) -> None:
    database = str(tmp_path / "again.db")
    first = open_store("milvus", "docs", uri=database)
    _fill(first)
    first.close()

    _assert_rows_found(open_store("milvus", "docs", uri=database))


def test_closing_one_of_two_stores_on_a_file_leaves_the_other_working_until_it_closes(
    tmp_path: Path,
) -> None:
    database = tmp_path / "two.db"
    first = open_store("milvus", "docs", uri=str(database))
    _fill(first)
    second = open_store("milvus", "docs", uri=str(database))
    first.close()
    _assert_rows_found(second)  # and closes it: the last one

    other = _other_process_opens(database)

    assert other.returncode == 0, other.stderr[-2000:]


def test_a_pymilvus_client_of_the_user_keeps_the_server_poolrag_started(tmp_path: Path) -> None:
    database = str(tmp_path / "shared.db")
    store = open_store("milvus", "docs", uri=database)
    _fill(store)
    theirs = MilvusClient(uri=database)
    try:
        store.close()
        assert theirs.list_collections() == ["docs"]
        assert theirs.query("docs", ids=["c3"], output_fields=["id"])[0]["id"] == "c3"
    finally:
        theirs.close()


@pytest.mark.filterwarnings("ignore:.*ORM-style PyMilvus API:FutureWarning")  # deprecated in 3.0
def test_an_orm_connection_of_the_user_keeps_the_server_poolrag_started(tmp_path: Path) -> None:
    without = "this pymilvus has no ORM, so no ORM connection"
    connections = pytest.importorskip("pymilvus.orm.connections", reason=without).connections
    utility = pytest.importorskip("pymilvus.orm.utility", reason=without)
    database = str(tmp_path / "orm.db")
    store = open_store("milvus", "docs", uri=database)
    _fill(store)
    connections.connect(alias="theirs", uri=database)
    try:
        store.close()
        assert utility.list_collections(using="theirs") == ["docs"]
    finally:
        connections.disconnect("theirs")


def test_a_server_someone_else_started_is_left_running(tmp_path: Path) -> None:
    database = tmp_path / "theirs.db"
    theirs = MilvusClient(uri=str(database))
    theirs.close()  # a closed client leaves its server up, and poolrag did not start it
    store = open_store("milvus", "docs", uri=str(database))
    _fill(store)
    store.close()

    other = _other_process_opens(database)

    assert other.returncode != 0
    assert "another process holds the lock" in other.stderr  # the server this process started first
