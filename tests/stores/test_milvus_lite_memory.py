"""A Milvus Lite file says once, when its rows outgrow memory, which stores keep rows on disk.

Milvus Lite runs in the ingest's process and keeps every stored row loaded, so the ingest's RSS
grows with the corpus however the rest streams. The bound is lowered here so that a few dozen real
rows pass it; the count covers what the file held before the store was opened.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from poolrag.stores import ChunkRecord, CollectionSpec, milvus_lite_memory, open_store
from poolrag.stores.milvus_lite_memory import ROW_OVERHEAD_BYTES

SPEC = CollectionSpec(name="docs", dimension=8, model_identity="tiny@1", full_dimension=8, model_name="tiny")
TEXT = "a sentence of prose about honeybees and tides, " * 2  # 96 bytes
ROW = ROW_OVERHEAD_BYTES + 4 * 8 + len(TEXT)


def _records(first: int, n: int) -> list[ChunkRecord]:
    rng = np.random.default_rng(first)
    return [
        ChunkRecord(f"c{i}", rng.standard_normal(8).astype(np.float32), {"text": TEXT, "source": "a.txt"})
        for i in range(first, first + n)
    ]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == milvus_lite_memory.__name__]


@pytest.fixture
def bound_of_25_rows(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(milvus_lite_memory, "RESIDENT_BOUND_BYTES", 25 * ROW)
    caplog.set_level(logging.WARNING)


@pytest.mark.usefixtures("bound_of_25_rows")
def test_the_warning_comes_once_when_the_rows_pass_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "docs.db"
    store = open_store("milvus", "docs", uri=str(database))
    try:
        store.ensure_collection(SPEC)
        store.upsert(_records(0, 20))
        assert _warnings(caplog) == []  # 20 rows: under the bound
        store.upsert(_records(20, 10))
        (message,) = _warnings(caplog)
        assert str(database) in message and "~30 chunks" in message
        assert "--store qdrant-edge" in message and "Milvus server" in message
        store.upsert(_records(30, 10))
        assert len(_warnings(caplog)) == 1  # said once
        assert store.count() == 40  # the warning loses nothing
    finally:
        store.close()


@pytest.mark.usefixtures("bound_of_25_rows")
def test_rows_already_in_the_file_count(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    database = tmp_path / "docs.db"
    first = open_store("milvus", "docs", uri=str(database))
    first.ensure_collection(SPEC)
    first.upsert(_records(0, 24))
    first.close()
    assert _warnings(caplog) == []
    again = open_store("milvus", "docs", uri=str(database))
    try:
        again.ensure_collection(SPEC)
        again.upsert(_records(24, 2))  # 2 new rows, but 26 in the file: past the bound
        (message,) = _warnings(caplog)
        assert "~26 chunks" in message
    finally:
        again.close()


def test_a_milvus_server_is_not_warned_about(
    milvus_server_uri: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(milvus_lite_memory, "RESIDENT_BOUND_BYTES", 1)
    caplog.set_level(logging.WARNING)
    store = open_store("milvus", "docs", uri=milvus_server_uri)
    try:
        store.ensure_collection(SPEC)
        store.upsert(_records(0, 5))
        assert store.count() == 5
    finally:
        store.close()
    assert _warnings(caplog) == []  # the rows live in the server's process, not this one
