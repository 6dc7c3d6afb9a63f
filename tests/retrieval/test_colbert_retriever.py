"""ColbertRetriever, the one ColBERT stack: add/search/delete over the in-memory store, Qdrant local
mode, Milvus Lite and Qdrant Edge with a real ColBERT engine. MaxSim order and scores equal the
engine's and a hand computation; filters, idempotent re-adds, delete, k, async == sync."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.params import PoolingParams
from poolrag.retrieval import ColbertRetriever, CrossEncoderReranker
from poolrag.stores import (
    CollectionMismatchError,
    CollectionSpec,
    InMemoryStore,
    VectorStore,
    open_store,
)
from poolrag.testing.rag_corpus import CORPUS, METADATAS, TEXTS

pytestmark = pytest.mark.real_weights

IDS = [f"doc-{i}" for i in range(len(TEXTS))]
QUERY = "What is the capital of France?"
KINDS = ["memory", "qdrant", "milvus", "qdrant-edge"]


@pytest.fixture(scope="module")
def colbert(assets: Path) -> Engine:
    return Engine(assets / "colbert-pylate")


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., VectorStore]:
    opened: list[VectorStore] = []

    def make(kind: str, collection: str = "docs") -> VectorStore:
        if kind == "memory":
            return InMemoryStore(collection)
        location = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / kind)}
        store = open_store(kind, collection, **location)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def filled(store: VectorStore, engine: Engine) -> ColbertRetriever:
    retriever = ColbertRetriever(store, engine)
    assert retriever.add_texts(TEXTS, METADATAS, IDS) == IDS
    return retriever


def hand_maxsim(engine: Engine, query: str) -> np.ndarray:
    """MaxSim from the token vectors themselves: per query token its best document token, summed."""
    q = engine.encode_arrays([query], "token_embed", PoolingParams(input_type="query"))[0]
    docs = engine.encode_arrays(TEXTS, "token_embed", PoolingParams(input_type="document"))
    return np.asarray([sum(max(float(a @ b) for b in d) for a in q) for d in docs])


@pytest.mark.parametrize("kind", KINDS)
def test_order_and_scores_are_maxsim(kind: str, colbert: Engine, make_store) -> None:
    retriever = filled(make_store(kind), colbert)
    for query in (QUERY, "Which organelle produces energy in cells?"):
        hits = retriever.search(query, k=len(TEXTS))
        engine_scores = colbert.score_array(query, TEXTS)
        np.testing.assert_allclose(hand_maxsim(colbert, query), engine_scores, rtol=1e-5)
        assert [h.id for h in hits] == [IDS[i] for i in np.argsort(-engine_scores, kind="stable")]
        np.testing.assert_allclose([h.score for h in hits], np.sort(engine_scores)[::-1], rtol=1e-5)
        for h in hits:
            i = IDS.index(h.id)
            assert (h.text, h.metadata, h.source, h.position) == (
                TEXTS[i],
                METADATAS[i],
                "",
                {},
            )  # added whole
            assert h.stage_scores == {"maxsim": h.score}
    assert retriever.search(QUERY, k=1)[0].id == "doc-0"


@pytest.mark.parametrize("kind", KINDS)
def test_token_vectors_the_engine_does_not_normalise_are_scored_as_sent(
    kind: str, assets: Path, make_store
) -> None:
    """MaxSim is of the token vectors as the engine gives them (PyLate's colbert_scores is a plain
    dot product): every store scores an unnormalised model's vectors as engine.score does, not
    as cosines of them."""
    raw = Engine(assets / "colbert-pylate", pooler_config={"normalize": False})
    retriever = filled(make_store(kind), raw)
    engine_scores = raw.score_array(QUERY, TEXTS)
    assert engine_scores.max() > 2 * 32  # far above any sum of 32 cosines
    hits = retriever.search(QUERY, k=len(TEXTS))
    assert [h.id for h in hits] == [IDS[i] for i in np.argsort(-engine_scores, kind="stable")]
    np.testing.assert_allclose([h.score for h in hits], np.sort(engine_scores)[::-1], rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_metadata_filters_pick_the_best_matching_texts(kind: str, colbert: Engine, make_store) -> None:
    retriever = filled(make_store(kind), colbert)
    everything = retriever.search(QUERY, k=len(TEXTS))
    biology = retriever.search(QUERY, k=len(TEXTS), filter={"topic": "biology"})
    assert [h.id for h in biology] == [h.id for h in everything if h.metadata["topic"] == "biology"]
    assert len(biology) == 2
    any_of = retriever.search(QUERY, k=2, filter={"topic": ["cooking", "computing"], "year": 2022})
    expected = [
        h.id
        for h in everything
        if h.metadata["topic"] in ("cooking", "computing") and h.metadata["year"] == 2022
    ]
    assert [h.id for h in any_of] == expected[:2] and expected
    # k counts matching texts: the geography ones rank first overall, the filter still fills k.
    cooking_or_biology = retriever.search(QUERY, k=3, filter={"topic": ["cooking", "biology"]})
    assert len(cooking_or_biology) == 3
    assert retriever.search(QUERY, filter={"topic": "astronomy"}) == []
    assert retriever.search(QUERY, filter={"missing_key": 1}) == []
    with pytest.raises(InvalidInputError, match="identifiers"):
        retriever.search(QUERY, filter={'topic" or 1': 1})


@pytest.mark.parametrize("kind", KINDS)
def test_re_adding_is_idempotent_and_delete_removes(kind: str, colbert: Engine, make_store) -> None:
    retriever = ColbertRetriever(make_store(kind), colbert)
    assert retriever.count() == 0 and retriever.search(QUERY) == []  # no collection yet
    first = retriever.add_texts(TEXTS, METADATAS)
    assert retriever.add_texts(TEXTS, METADATAS) == first and len(set(first)) == len(TEXTS)
    assert retriever.count() == len(TEXTS)
    # Another metadata makes another text; a caller's id replaces what it named.
    other = retriever.add_texts([TEXTS[0]], [{"topic": "travel"}])
    assert other[0] not in first and retriever.count() == len(TEXTS) + 1
    retriever.add_texts(["Rome is the capital of Italy."], [{"topic": "geography"}], ids=[first[0]])
    assert retriever.count() == len(TEXTS) + 1
    top = retriever.search("What is the capital of Italy?", k=1)[0]
    assert (top.id, top.text) == (first[0], "Rome is the capital of Italy.")
    retriever.delete([first[0], first[1], "never-added"])
    assert retriever.count() == len(TEXTS) - 1
    # A metadata field called doc_id is the caller's data, not the id.
    retriever.add_texts(["Owls hunt at night."], [{"doc_id": "theirs"}], ids=["mine"])
    owl = retriever.search("Which birds hunt at night?", k=1)[0]
    assert (owl.id, owl.metadata) == ("mine", {"doc_id": "theirs"})
    assert {first[0], first[1]}.isdisjoint(h.id for h in retriever.search("capital", k=len(TEXTS)))


@pytest.mark.parametrize("kind", KINDS)
def test_a_text_repeated_without_ids_is_stored_once(kind: str, colbert: Engine, make_store) -> None:
    """Content ids: the same text and metadata twice in one add is one row (encoded once; Milvus
    refuses one write naming an id twice), and each input still gets its id back."""
    retriever = ColbertRetriever(make_store(kind), colbert)
    ids = retriever.add_texts(
        ["Chapter 1", "Paris is in France.", "Chapter 1"], [{"p": 1}, {"p": 2}, {"p": 1}]
    )
    assert ids[0] == ids[2] != ids[1] and retriever.count() == 2
    assert asyncio.run(retriever.aadd_texts(["Chapter 1", "Chapter 1"], [{"p": 1}, {"p": 1}])) == [ids[0]] * 2
    assert retriever.count() == 2


def test_async_equals_sync(colbert: Engine, make_store) -> None:
    sync = filled(make_store("qdrant"), colbert)

    async def run() -> tuple[list, list, list]:
        fresh = ColbertRetriever(make_store("memory"), colbert)
        assert await fresh.aadd_texts(TEXTS, METADATAS, IDS) == IDS
        both = await asyncio.gather(fresh.asearch(QUERY, k=4), fresh.asearch("bread", k=2))
        return both[0], both[1], await fresh.asearch(QUERY, k=3, filter={"year": 2021})

    plain, bread, filtered = asyncio.run(run())
    for got, want in [
        (plain, sync.search(QUERY, k=4)),
        (bread, sync.search("bread", k=2)),
        (filtered, sync.search(QUERY, k=3, filter={"year": 2021})),
    ]:
        assert [h.id for h in got] == [h.id for h in want]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], rtol=1e-5)


def test_a_qdrant_collection_on_disk_is_searchable_after_reopening(colbert: Engine, tmp_path: Path) -> None:
    store = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    before = filled(store, colbert).search(QUERY, k=3)
    store.close()
    reopened = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    retriever = ColbertRetriever(reopened, colbert)
    assert retriever.count() == len(TEXTS)
    after = retriever.search(QUERY, k=3)
    assert [(h.id, h.metadata) for h in after] == [(h.id, h.metadata) for h in before]
    reopened.close()


def test_bad_arguments_are_refused(colbert: Engine, minilm_engine: Engine) -> None:
    retriever = filled(InMemoryStore("docs"), colbert)
    for k in (0, -1, True, 2.5, "3"):
        with pytest.raises(InvalidInputError, match="k must be a positive integer"):
            retriever.search(QUERY, k=k)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="filter must be a mapping"):
        retriever.search(QUERY, filter=["topic"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="empty list"):
        retriever.search(QUERY, filter={"topic": []})
    with pytest.raises(InvalidInputError, match=r"^query is empty"):  # named as the query, not input[0]
        retriever.search("   ")
    with pytest.raises(InputTypeError, match=r"^query must be a string"):
        asyncio.run(retriever.asearch(42))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="equal lengths"):
        retriever.add_texts(["a", "b"], metadatas=[{}])
    with pytest.raises(InvalidInputError, match="equal lengths"):
        retriever.add_texts(["a", "b"], ids=["x"])
    with pytest.raises(InvalidInputError, match="unique"):
        retriever.add_texts(["a", "b"], ids=["x", "x"])
    with pytest.raises(InvalidInputError, match="payload's own fields"):
        retriever.add_texts(["a"], [{"text": "clash"}])
    with pytest.raises(InvalidInputError, match="list of texts"):
        retriever.add_texts("one string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="list of ids"):
        retriever.delete("doc-1")  # type: ignore[arg-type]
    assert retriever.add_texts([]) == [] and retriever.count() == len(TEXTS)
    with pytest.raises(InvalidInputError, match="not a ColBERT"):
        ColbertRetriever(InMemoryStore("docs"), minilm_engine)


def test_collections_of_another_layout_or_model_are_refused(colbert: Engine) -> None:
    dense = InMemoryStore("dense")
    dense.ensure_collection(CollectionSpec("dense", 96, colbert.facts.model_identity, 96))
    with pytest.raises(InvalidInputError, match="single vectors"):
        ColbertRetriever(dense, colbert)
    other = InMemoryStore("other")
    other.ensure_collection(CollectionSpec("other", 96, "m@ffffffffffffffff", 96, layout="multivector"))
    with pytest.raises(CollectionMismatchError, match="query model"):
        ColbertRetriever(other, colbert)


def test_a_collection_another_writer_made_of_single_vectors_stays_refused(colbert: Engine) -> None:
    """Made after the retriever was: refused at each write, the second as the first (kept after its
    refusal, it let the second write token vectors into the dense collection)."""
    store = InMemoryStore("late")
    retriever = ColbertRetriever(store, colbert)
    store.ensure_collection(CollectionSpec("late", 96, colbert.facts.model_identity, 96))
    for _ in range(2):
        with pytest.raises(InvalidInputError, match="single vectors"):
            retriever.add_texts(TEXTS[:1])
    assert store.count() == 0


def test_a_cross_encoder_reranks_the_maxsim_candidates(colbert: Engine, assets: Path) -> None:
    cross_encoder = Engine(assets / "ms-marco-MiniLM-L-12-v2")
    replace = CrossEncoderReranker(cross_encoder, second_stage="replace")  # fused: test_rerank_fusion.py
    retriever = ColbertRetriever(InMemoryStore("docs"), colbert, reranker=replace)
    retriever.add_texts(TEXTS, METADATAS, IDS)
    hits = retriever.search(QUERY, k=3, filter={"topic": "geography"})
    expected = cross_encoder.score_array(QUERY, [h.text for h in hits])
    assert [h.score for h in hits] == pytest.approx(list(expected), abs=1e-5)
    assert all(set(h.stage_scores) == {"maxsim", "rerank"} for h in hits)
    assert hits[0].id == "doc-0" and {h.metadata["topic"] for h in hits} == {"geography"}


@pytest.mark.parametrize("kind", ["qdrant", "milvus"])
def test_searches_a_collection_poolrag_ingest_filled(
    kind: str, colbert: Engine, make_store, tmp_path: Path
) -> None:
    from poolrag.ingest import ColbertEncoder, Document, IngestPipeline, TokenChunker

    store = make_store(kind, "ingested")
    IngestPipeline(
        store,
        ColbertEncoder(colbert),
        TokenChunker.for_model(colbert.tokenizer, colbert.facts, max_tokens=100),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run([Document(f"doc{i}.txt", t, dict(m)) for i, (t, m) in enumerate(CORPUS)])
    retriever = ColbertRetriever(store, colbert)
    query = "Which programming language is easy to read?"
    hits = retriever.search(query, k=len(TEXTS))
    scores = colbert.score_array(query, TEXTS)
    assert [h.source for h in hits] == [f"doc{i}.txt" for i in np.argsort(-scores, kind="stable")]
    np.testing.assert_allclose([h.score for h in hits], np.sort(scores)[::-1], rtol=1e-5)
    assert hits[0].metadata == {**METADATAS[4], "source": "doc4.txt"}
    assert [h.text for h in retriever.search(query, filter={"source": "doc7.txt"})] == [TEXTS[7]]
    assert [h.metadata["topic"] for h in retriever.search(query, filter={"topic": "biology"})] == [
        "biology"
    ] * 2
    retriever.delete([hits[0].id])  # ingest's ids are the store's own
    assert retriever.count() == len(TEXTS) - 1
