"""Issue 28, item 4: the store template runs the shared checks once, before any database sees the
call, so every store (the test-registered ``process`` one included) refuses the same bad input with
the same one-line message and writes nothing of a batch it refuses."""

from __future__ import annotations

import numpy as np
import pytest
from stores_support import SEARCH_KINDS

from poolrag.errors import InvalidInputError
from poolrag.stores import ChunkRecord, CollectionNotFoundError, CollectionSpec, UnsupportedStoreFeature

DIM = 8


def _spec(layout: str = "dense") -> CollectionSpec:
    return CollectionSpec(
        name="docs", dimension=DIM, model_identity="m@0123456789abcdef", full_dimension=DIM, layout=layout
    )


def _records(n: int, layout: str = "dense") -> list[ChunkRecord]:
    rng = np.random.default_rng(7)
    shape = (3, DIM) if layout == "multivector" else (DIM,)
    return [
        ChunkRecord(f"{i:08d}-0000-4000-8000-000000000000", rng.normal(size=shape), {"source": f"d{i}.md"})
        for i in range(n)
    ]


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_calls_on_a_missing_collection_name_it(kind: str, make_store) -> None:
    store = make_store(kind)
    where = f"{store.name} at {store.location}"
    with pytest.raises(CollectionNotFoundError) as err:
        store.upsert(_records(1))
    assert str(err.value) == f"collection 'docs' in {where} does not exist"
    with pytest.raises(CollectionNotFoundError, match="does not exist"):
        store.search(np.ones(DIM), 3)
    with pytest.raises(CollectionNotFoundError, match="does not exist"):
        store.update_spec(_spec())
    assert store.read_spec() is None


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_bad_queries_are_refused_alike_by_every_store(kind: str, make_store) -> None:
    store = make_store(kind)
    store.ensure_collection(_spec())
    store.upsert(_records(4))
    with pytest.raises(InvalidInputError) as err:
        store.search(np.ones(DIM + 1), 3)
    assert str(err.value) == f"query must be a [{DIM}] vector, got shape ({DIM + 1},)"
    for limit in (0, -1, 2.5, True):
        with pytest.raises(InvalidInputError, match="limit must be a positive integer"):
            store.search(np.ones(DIM), limit)
    with pytest.raises(InvalidInputError, match="holds single vectors; use search"):
        store.search_multivector(np.ones((2, DIM)), 3)
    with pytest.raises(InvalidInputError, match="filter keys must be identifiers"):
        store.search(np.ones(DIM), 3, filter={"bad key": 1})
    assert len(store.search(np.ones(DIM), 3)) == 3


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_token_vector_queries_are_checked_and_an_empty_one_finds_nothing(kind: str, make_store) -> None:
    store = make_store(kind)
    store.ensure_collection(_spec("multivector"))
    store.upsert(_records(3, "multivector"))
    with pytest.raises(InvalidInputError, match="holds token vectors; use search_multivector"):
        store.search(np.ones(DIM), 3)
    with pytest.raises(InvalidInputError, match=rf"query must be a \[tokens, {DIM}\] matrix"):
        store.search_multivector(np.ones((2, DIM + 1)), 3)
    assert store.search_multivector(np.zeros((0, DIM)), 3) == []
    assert len(store.search_multivector(np.ones((2, DIM)), 2)) == 2


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_a_refused_batch_writes_nothing_and_empty_calls_touch_nothing(kind: str, make_store) -> None:
    store = make_store(kind)
    store.ensure_collection(_spec())
    store.upsert(_records(2))
    batch = _records(4)
    batch[3].multivector = np.ones((2, DIM))  # a field this collection does not have
    with pytest.raises(UnsupportedStoreFeature, match="has no token-vector field"):
        store.upsert(batch)
    assert store.count() == 2
    store.upsert([])
    store.delete([])
    assert store.fetch_vectors([]) == {}
    first = batch[0].id
    store.delete([first, first])  # a repeated id is deleted once
    assert store.count() == 1 and first not in store.list_sources()
