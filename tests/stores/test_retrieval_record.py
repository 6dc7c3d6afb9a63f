"""The saved retrieval record: written into an existing collection's metadata by every store, read back
by a new connection, every field checked on read, and a bad record refused naming the collection and
the field (real Milvus Lite, Qdrant local mode and qdrant-edge, and the in-memory store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolrag.stores import CollectionMismatchError, CollectionNotFoundError, CollectionSpec
from poolrag.stores.base import METADATA_KEY
from poolrag.stores.retrieval_record import (
    RetrievalRecord,
    RetrievalRecordError,
    save_record,
    saved_record,
)

SPEC = CollectionSpec("docs", 4, "model@abc", 4, sparse="bm25")
GOOD = {"version": 1, "fusion": "minmax", "sparse_weight": 0.15, "prefetch": 20, "rerank_weight": None}


def test_a_record_round_trips_through_its_metadata() -> None:
    for record in [
        RetrievalRecord(("minmax", 0.15), 20),
        RetrievalRecord("rrf", 10, 0.75),
        RetrievalRecord(("weighted", 0.3), 7),
        RetrievalRecord("dbsf", 1),
        RetrievalRecord(("adaptive", 0.3), 50),
    ]:
        data = json.loads(json.dumps(record.to_metadata()))
        assert RetrievalRecord.from_metadata("docs", data) == record


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"version": 2}, "version", "must be 1, got 2"),
        (
            {"fusion": "poolrag.stores.hybrid:fuse_legs"},
            "fusion",
            "must be one of weighted, minmax, adaptive, rrf, dbsf",
        ),
        ({"sparse_weight": 1.5}, "sparse_weight", "must be a number in [0, 1] for minmax, got 1.5"),
        ({"sparse_weight": "0.2"}, "sparse_weight", "must be a number in [0, 1] for minmax"),
        ({"fusion": "rrf"}, "sparse_weight", "must be null for rrf, got 0.15"),
        ({"prefetch": 0}, "prefetch", "must be an integer in [1, 10000], got 0"),
        ({"prefetch": 10**9}, "prefetch", "must be an integer in [1, 10000]"),
        ({"prefetch": True}, "prefetch", "must be an integer"),
        ({"rerank_weight": -0.1}, "rerank_weight", "must be null or a number in [0, 1], got -0.1"),
        ({"trust_remote_code": True}, "trust_remote_code", "is not a field of the record"),
    ],
)
def test_every_bad_field_is_refused_by_name(change: dict, field: str, why: str) -> None:
    with pytest.raises(RetrievalRecordError) as caught:
        RetrievalRecord.from_metadata("docs", {**GOOD, **change})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"collection 'docs' has a bad saved retrieval record: {field} {why}")


def test_every_rule_a_store_fuses_by_can_be_saved() -> None:
    """The record names the stores' own rules, the default included, and no others."""
    from poolrag.stores.hybrid import DEFAULT_FUSION, PLAIN_RULES, SHARE_RULES

    for rule in PLAIN_RULES:
        assert (
            RetrievalRecord.from_metadata("docs", {**GOOD, "fusion": rule, "sparse_weight": None}).fusion
            == rule
        )
    for rule in SHARE_RULES:
        assert RetrievalRecord.from_metadata("docs", {**GOOD, "fusion": rule}).fusion == (rule, 0.15)
    assert RetrievalRecord.from_metadata(
        "docs", RetrievalRecord(DEFAULT_FUSION, 50).to_metadata()
    ).fusion == (DEFAULT_FUSION)


def test_a_record_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(RetrievalRecordError, match="record must be an object, got str"):
        saved_record(CollectionSpec("docs", 4, "m@a", 4, retrieval="rrf"))  # type: ignore[arg-type]
    assert saved_record(SPEC) is None


@pytest.mark.parametrize("kind", ["memory", "milvus", "qdrant", "qdrant-edge"])
def test_each_store_saves_the_record_into_an_existing_collection(
    kind: str, make_store, tmp_path: Path
) -> None:
    store = make_store(kind)
    with pytest.raises(CollectionNotFoundError, match="does not exist"):
        save_record(store, RetrievalRecord("rrf", 10))
    store.ensure_collection(SPEC)
    record = RetrievalRecord(("minmax", 0.2), 30)
    save_record(store, record)
    assert saved_record(store.read_spec()) == record
    if kind != "memory":  # a new connection reads it back from the database
        store.close()
        store = make_store(kind)
        assert saved_record(store.read_spec()) == record
    # The saved record stays through a later ingest (ensure_collection keeps the stored spec) and is
    # replaced by the next save.
    assert saved_record(store.ensure_collection(SPEC)) == record
    save_record(store, RetrievalRecord("dbsf", 5))
    assert saved_record(store.read_spec()) == RetrievalRecord("dbsf", 5)
    # A metadata update never changes what vectors the collection holds.
    with pytest.raises(CollectionMismatchError):
        store.update_spec(CollectionSpec("docs", 8, "model@abc", 8, sparse="bm25"))


def _write_raw(kind: str, store, retrieval: object) -> None:
    """A record written straight into the store's own metadata, past poolrag's checks."""
    text = json.dumps({**json.loads(SPEC.to_metadata()), "retrieval": retrieval})
    if kind == "milvus":
        store._client.alter_collection_properties(store.collection, {METADATA_KEY: text})
    elif kind == "qdrant":
        store._client.update_collection(store.collection, metadata={METADATA_KEY: text})
    else:
        (store.root / "poolrag.json").write_text(text)


@pytest.mark.parametrize("kind", ["milvus", "qdrant", "qdrant-edge"])
def test_a_bad_record_written_into_the_store_is_refused_on_read(kind: str, make_store) -> None:
    store = make_store(kind)
    store.ensure_collection(SPEC)
    _write_raw(kind, store, {**GOOD, "fusion": "arctan"})
    store.close()
    reopened = make_store(kind)
    spec = reopened.read_spec()  # the collection itself still opens (ingest and --save keep working)
    assert spec is not None and spec.dimension == 4
    with pytest.raises(RetrievalRecordError) as caught:
        saved_record(spec)
    assert str(caught.value).startswith("collection 'docs' has a bad saved retrieval record: fusion must be")
    save_record(reopened, RetrievalRecord("rrf", 10))  # a new --save replaces it
    assert saved_record(reopened.read_spec()) == RetrievalRecord("rrf", 10)
