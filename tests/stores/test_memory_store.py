"""InMemoryStore: exact MaxSim and cosine equal a hand computation, and it keeps the collection
contract of the database stores (layout, size and model checked; replace, delete, count)."""

from __future__ import annotations

import numpy as np
import pytest

from poolrag.errors import InvalidInputError
from poolrag.stores import (
    ChunkRecord,
    CollectionMismatchError,
    CollectionNotFoundError,
    CollectionSpec,
    InMemoryStore,
)


def _spec(layout: str = "multivector", dim: int = 4) -> CollectionSpec:
    return CollectionSpec(name="c", dimension=dim, model_identity="m@1", full_dimension=dim, layout=layout)  # type: ignore[arg-type]


def _hand_maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    total = 0.0
    for q in query:
        total += max(sum(float(a) * float(b) for a, b in zip(q, d, strict=True)) for d in doc)
    return total


def test_maxsim_equals_a_hand_computation_over_documents_of_different_lengths() -> None:
    rng = np.random.default_rng(7)
    docs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (1, 5, 3, 9)]
    store = InMemoryStore("c")
    store.ensure_collection(_spec())
    store.upsert([ChunkRecord(f"d{i}", m, {"text": f"t{i}"}) for i, m in enumerate(docs)])
    query = rng.standard_normal((3, 4)).astype(np.float32)
    hits = store.search_multivector(query, 10)
    hand = {f"d{i}": _hand_maxsim(query, m) for i, m in enumerate(docs)}
    assert [h.id for h in hits] == sorted(hand, key=lambda k: -hand[k])
    for h in hits:
        assert h.score == pytest.approx(hand[h.id], rel=1e-5)
    assert [h.id for h in store.search_multivector(query, 2)] == [h.id for h in hits[:2]]


def test_dense_search_is_exact_cosine() -> None:
    store = InMemoryStore("c")
    store.ensure_collection(_spec("dense", 3))
    vectors = {"a": [1.0, 0.0, 0.0], "b": [2.0, 2.0, 0.0], "c": [0.0, 0.0, -5.0]}
    store.upsert([ChunkRecord(k, np.asarray(v), {"source": k}) for k, v in vectors.items()])
    hits = store.search(np.asarray([3.0, 1.0, 0.0]), 3)
    q = np.asarray([3.0, 1.0, 0.0])
    hand = {k: float(np.dot(v, q) / np.linalg.norm(v) / np.linalg.norm(q)) for k, v in vectors.items()}
    assert [h.id for h in hits] == ["a", "b", "c"]
    assert [h.score for h in hits] == pytest.approx([hand["a"], hand["b"], hand["c"]], abs=1e-6)


def test_replace_delete_count_and_fetch() -> None:
    store = InMemoryStore("c")
    assert store.read_spec() is None and store.count() == 0
    with pytest.raises(CollectionNotFoundError):
        store.upsert([ChunkRecord("x", np.ones((2, 4)), {})])
    store.ensure_collection(_spec())
    vectors = np.eye(4, dtype=np.float32)
    store.upsert(
        [ChunkRecord("x", vectors[:2], {"source": "a"}), ChunkRecord("y", vectors[2:], {"source": "b"})]
    )
    store.upsert([ChunkRecord("x", vectors[3:], {"source": "c"})])  # same id: replaced, fewer tokens
    assert store.count() == 2 and store.list_sources() == {"x": "c", "y": "b"}
    np.testing.assert_array_equal(store.fetch_vectors(["x", "nope"])["x"], vectors[3:])
    assert store.search_multivector(vectors[3:], 1)[0].id == "x"
    store.delete(["x", "never-added"])
    assert store.count() == 1 and [h.id for h in store.search_multivector(vectors[3:], 5)] == ["y"]
    store.delete(["y"])
    assert store.search_multivector(vectors[3:], 5) == []


def test_the_collection_contract_is_kept() -> None:
    store = InMemoryStore("c")
    store.ensure_collection(_spec())
    with pytest.raises(CollectionMismatchError, match="dimension"):
        store.ensure_collection(_spec(dim=8))
    with pytest.raises(CollectionMismatchError, match="layout"):
        store.ensure_collection(_spec("dense"))
    with pytest.raises(InvalidInputError, match=r"\[tokens, dim\] vectors of size 4"):
        store.upsert([ChunkRecord("x", np.ones(4), {})])
    with pytest.raises(InvalidInputError, match="size 4"):
        store.upsert([ChunkRecord("x", np.ones((3, 5)), {})])
    with pytest.raises(InvalidInputError, match=r"\[tokens, 4\]"):
        store.search_multivector(np.ones((2, 5)), 1)
    with pytest.raises(InvalidInputError, match="use search_multivector"):
        store.search(np.ones(4), 1)
    with pytest.raises(InvalidInputError, match="collection name"):
        InMemoryStore("no/slash")
