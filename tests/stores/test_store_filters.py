"""Metadata filters in every store, for real: the best ``limit`` *matching* chunks come back (not a
post-filtered shortlist), all stores agree on what matches, and no value can widen a filter."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from stores_support import SEARCH_KINDS, SENTENCES

from poolrag.errors import InvalidInputError
from poolrag.stores import ChunkRecord, CollectionSpec
from poolrag.stores.filters import check_filter, matches

LONG_SOURCE = "s" * 5000
TOPICS = ["nature", "nature", "food", "computing", "finance", "nature"]


def _ids() -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"filtered-{i}")) for i in range(len(SENTENCES))]


def _payload(i: int) -> dict:
    return {
        "text": SENTENCES[i],
        "source": LONG_SOURCE if i == 5 else f"doc-{i % 2}.md",
        "topic": TOPICS[i],
        "year": 2020 + i % 3,
        "weight": 0.5 * i,
        "reviewed": i % 2 == 0,
        "id": f"user-{i}",  # a Milvus column name: Milvus keeps it aside, the filter must find it there
    }


def _filled(make_store, kind: str, layout: str, vectors) -> object:
    store = make_store(kind)
    dim = int(np.shape(vectors[0])[-1])
    store.ensure_collection(
        CollectionSpec(
            name="docs",
            dimension=dim,
            model_identity="m@1",
            full_dimension=dim,
            layout=layout,  # type: ignore[arg-type]
        )
    )
    store.upsert(
        [ChunkRecord(cid, v, _payload(i)) for i, (cid, v) in enumerate(zip(_ids(), vectors, strict=True))]
    )
    return store


@pytest.fixture(params=["dense", "multivector"])
def layout_vectors(request, sentence_vectors, sentence_token_vectors):
    return request.param, (sentence_vectors if request.param == "dense" else sentence_token_vectors)


def _search(store, layout: str, vectors, i: int, limit: int, filter=None):
    if layout == "dense":
        return store.search(vectors[i], limit, filter)
    return store.search_multivector(vectors[i][:6], limit, filter)


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_filters_return_the_best_matching_chunks(kind: str, make_store, layout_vectors) -> None:
    layout, vectors = layout_vectors
    store = _filled(make_store, kind, layout, vectors)
    ids = _ids()
    everything = _search(store, layout, vectors, 0, len(SENTENCES))
    assert next(h.id for h in everything) == ids[0] and len(everything) == len(SENTENCES)

    def expected(predicate, limit: int = len(SENTENCES)) -> list[str]:
        return [h.id for h in everything if predicate(h.payload)][:limit]

    def found(filter, limit: int = len(SENTENCES)) -> list[str]:
        return [h.id for h in _search(store, layout, vectors, 0, limit, filter)]

    # Chunk 0's query ranks the "nature" chunks first; two "food"/"computing" ones still come back.
    assert found({"topic": ["food", "computing"]}, 2) == expected(
        lambda p: p["topic"] in ("food", "computing")
    )
    assert found({"topic": "nature", "year": 2020}) == expected(
        lambda p: p["topic"] == "nature" and p["year"] == 2020
    )
    assert found({"weight": 1.5}) == [ids[3]]
    if kind == "qdrant-edge":  # its Python binding turns True into 1: refused, not silently empty
        with pytest.raises(InvalidInputError, match="qdrant-edge cannot filter on boolean"):
            found({"reviewed": True})
    else:
        assert found({"reviewed": True}) == expected(lambda p: p["reviewed"] is True)
    assert found({"reviewed": 1}) == []  # a boolean is not the number 1 in any store
    assert found({"year": [2021, 2022]}, 3) == expected(lambda p: p["year"] in (2021, 2022), 3)
    assert found({"source": "doc-1.md"}) == expected(lambda p: p["source"] == "doc-1.md")
    assert found({"source": LONG_SOURCE}) == [ids[5]]
    assert found({"id": "user-4"}) == [ids[4]]
    assert found({"missing": "x"}) == []
    assert found({"topic": "astronomy"}) == []
    # Values are data: a quote cannot close the string and add a condition that matches everything.
    assert found({"source": 'doc-0.md" or source != "x'}) == []
    assert found({"topic": "nature\\"}) == []
    hit = _search(store, layout, vectors, 4, 1, {"topic": "finance"})[0]
    assert (hit.id, hit.payload) == (ids[4], _payload(4))


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_bad_filters_are_refused_by_every_store(kind: str, make_store, sentence_vectors) -> None:
    store = _filled(make_store, kind, "dense", sentence_vectors)
    for bad, message in [
        ({"a.b": 1}, "identifiers"),
        ({'x"]': 1}, "identifiers"),
        ({"$meta": 1}, "identifiers"),
        ({"topic": {"$ne": 1}}, "string, number or boolean"),
        ({"topic": []}, "empty list"),
        (["topic"], "mapping"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            store.search(sentence_vectors[0], 3, bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"": 1},
        {"1topic": 1},
        {"to pic": 1},
        {"topic": None},
        {"w": float("nan")},
        {"t": "a\nb"},
        {"t": [1, None]},
    ],
)
def test_check_filter_refuses_what_no_store_could_match_exactly(bad) -> None:
    with pytest.raises(InvalidInputError):
        check_filter(bad)


def test_check_filter_normalises_values_to_lists_and_matches_exactly() -> None:
    checked = check_filter({"topic": "a", "year": (2020, 2021), "ok": True})
    assert checked == {"topic": ["a"], "year": [2020, 2021], "ok": [True]}
    assert check_filter(None) is None and check_filter({}) is None
    assert matches({"topic": "a", "year": 2021, "ok": True}, checked)
    assert not matches({"topic": "a", "year": 2021, "ok": 1}, checked)
    assert not matches({"topic": "a", "year": True, "ok": True}, check_filter({"year": 1}))
    assert matches({"w": 2}, check_filter({"w": 2.0}))
    assert not matches({"topic": "a"}, checked)


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_a_payload_without_source_comes_back_without_one(
    kind: str, make_store, sentence_token_vectors
) -> None:
    store = make_store(kind)
    store.ensure_collection(
        CollectionSpec(
            name="docs", dimension=384, model_identity="m@1", full_dimension=384, layout="multivector"
        )
    )
    cid = _ids()[0]
    store.upsert([ChunkRecord(cid, sentence_token_vectors[0], {"text": SENTENCES[0], "lang": "en"})])
    (hit,) = store.search_multivector(sentence_token_vectors[0][:4], 3)
    assert hit.payload == {"text": SENTENCES[0], "lang": "en"}
    assert store.list_sources() == {cid: ""}
