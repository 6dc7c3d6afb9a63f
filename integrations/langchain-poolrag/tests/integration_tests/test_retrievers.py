"""PoolragColBERTRetriever: LangChain's standard retriever suite over the in-memory and Qdrant
stores and a server; MaxSim scores equal the engine's; k, filters, persistence, ingested collections."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_poolrag import PoolragColBERTRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from poolrag import Engine, InvalidInputError
from poolrag.stores import CollectionSpec, InMemoryStore, open_store
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS

IDS = [f"doc-{i}" for i in range(len(TEXTS))]


def corpus_documents() -> list[Document]:
    return [
        Document(page_content=t, metadata=dict(m), id=i)
        for t, m, i in zip(TEXTS, METADATAS, IDS, strict=True)
    ]


def engine_maxsim(engine: Engine, query: str) -> np.ndarray:
    return np.asarray([out.outputs.score for out in engine.score(query, TEXTS)])


def filled(store, **source) -> PoolragColBERTRetriever:
    return PoolragColBERTRetriever.from_documents(corpus_documents(), store=store, **source)


# -- LangChain's standard suite, three ways --------------------------------------------------------------
class _Standard(RetrieversIntegrationTests):
    """Every constructor call shares one filled store, as an application's retrievers would."""

    params: dict

    @property
    def retriever_constructor(self) -> type[PoolragColBERTRetriever]:
        return PoolragColBERTRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {**self.params, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "What is the capital of France?"


class TestStandardInMemory(_Standard):
    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _filled(cls, colbert_engine: Engine) -> None:
        cls.params = {
            "engine": colbert_engine,
            "store": filled(InMemoryStore(), engine=colbert_engine).store,
        }


class TestStandardQdrant(_Standard):
    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _filled(cls, colbert_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> None:
        store = open_store("qdrant", "colbert", path=str(tmp_path_factory.mktemp("qdrant")))
        cls.params = {"engine": colbert_engine, "store": filled(store, engine=colbert_engine).store}


class TestStandardRemote(_Standard):
    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _filled(cls, colbert_url: str) -> None:
        cls.params = {
            "base_url": colbert_url,
            "store": filled(InMemoryStore(), base_url=colbert_url).store,
        }


# -- ranking equals the engine's MaxSim ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def in_memory(colbert_engine: Engine) -> PoolragColBERTRetriever:
    return filled(InMemoryStore(), engine=colbert_engine, k=len(TEXTS))


@pytest.fixture(scope="module")
def in_qdrant(colbert_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> PoolragColBERTRetriever:
    store = open_store("qdrant", "colbert", path=str(tmp_path_factory.mktemp("qdrant")))
    return filled(store, engine=colbert_engine, k=len(TEXTS))


@pytest.mark.parametrize("retriever_fixture", ["in_memory", "in_qdrant"])
def test_scores_and_order_are_the_engines_maxsim(
    retriever_fixture: str, colbert_engine: Engine, request: pytest.FixtureRequest
) -> None:
    retriever: PoolragColBERTRetriever = request.getfixturevalue(retriever_fixture)
    for query, answer in list(QUERIES.items())[:2]:
        documents = retriever.invoke(query)
        scores = engine_maxsim(colbert_engine, query)
        assert [doc.id for doc in documents] == [IDS[i] for i in np.argsort(-scores, kind="stable")]
        assert documents[0].page_content == TEXTS[answer]
        for doc in documents:
            assert doc.metadata["score"] == pytest.approx(scores[IDS.index(doc.id)], rel=1e-5)
            assert doc.metadata["topic"] == METADATAS[IDS.index(doc.id)]["topic"]


@pytest.mark.parametrize("retriever_fixture", ["in_memory", "in_qdrant"])
def test_k_and_metadata_filters(retriever_fixture: str, request: pytest.FixtureRequest) -> None:
    retriever: PoolragColBERTRetriever = request.getfixturevalue(retriever_fixture)
    query = "What is the capital of France?"
    everything = retriever.invoke(query)
    assert [d.id for d in retriever.invoke(query, k=2)] == [d.id for d in everything[:2]]

    biology = retriever.invoke(query, filter={"topic": "biology"})
    assert [d.id for d in biology] == [d.id for d in everything if d.metadata["topic"] == "biology"]
    assert len(biology) == 2

    any_of = retriever.invoke(query, k=3, filter={"topic": ["cooking", "computing"], "year": 2022})
    expected = [
        d.id
        for d in everything
        if d.metadata["topic"] in ("cooking", "computing") and d.metadata["year"] == 2022
    ]
    assert [d.id for d in any_of] == expected[:3] and expected

    fixed = retriever.model_copy(update={"filter": {"topic": "geography"}, "k": 2})
    assert [d.id for d in fixed.invoke(query)] == [
        d.id for d in everything if d.metadata["topic"] == "geography"
    ][:2]
    assert retriever.invoke(query, filter={"topic": "astronomy"}) == []
    assert retriever.invoke(query, filter={"missing_key": 1}) == []


def test_k_is_configurable_at_run_time_on_a_retriever_sharing_an_engine(
    in_memory: PoolragColBERTRetriever,
) -> None:
    """configurable_fields rebuilds the retriever from its fields, engine= and the model name it
    filled in both among them (refused as two models before)."""
    from langchain_core.runnables import ConfigurableField

    query = "What is the capital of France?"
    configurable = in_memory.configurable_fields(k=ConfigurableField(id="hits", name="hits"))
    two = configurable.with_config(configurable={"hits": 2}).invoke(query)
    assert [d.id for d in two] == [d.id for d in in_memory.invoke(query)[:2]]


async def test_async_add_and_retrieve(colbert_engine: Engine, in_memory: PoolragColBERTRetriever) -> None:
    retriever = PoolragColBERTRetriever(engine=colbert_engine, k=3)
    ids = await retriever.aadd_documents(corpus_documents())
    assert ids == IDS
    query = "Which organelle produces energy in cells?"
    result = await retriever.ainvoke(query)
    expected = in_memory.invoke(query, k=3)
    assert [d.id for d in result] == [d.id for d in expected]
    np.testing.assert_allclose(
        [d.metadata["score"] for d in result], [d.metadata["score"] for d in expected], rtol=1e-5
    )


def test_remote_equals_in_process(colbert_url: str, in_memory: PoolragColBERTRetriever) -> None:
    remote = filled(InMemoryStore(), base_url=colbert_url, k=len(TEXTS))
    for query in list(QUERIES)[:2]:
        local_docs, remote_docs = in_memory.invoke(query), remote.invoke(query)
        assert [d.id for d in remote_docs] == [d.id for d in local_docs]
        np.testing.assert_allclose(
            [d.metadata["score"] for d in remote_docs], [d.metadata["score"] for d in local_docs], rtol=1e-5
        )


# -- the store: replace, delete, persist ---------------------------------------------------------------
def test_re_adding_an_id_replaces_it_and_delete_removes_it(colbert_engine: Engine) -> None:
    retriever = filled(InMemoryStore(), engine=colbert_engine, k=len(TEXTS))
    retriever.add_texts(["Rome is the capital of Italy."], [{"topic": "geography"}], ids=["doc-0"])
    assert retriever.colbert.count() == len(TEXTS)
    top = retriever.invoke("What is the capital of Italy?")[0]
    assert (top.id, top.page_content) == ("doc-0", "Rome is the capital of Italy.")
    retriever.delete(["doc-0", "doc-1"])
    assert retriever.colbert.count() == len(TEXTS) - 2
    assert {"doc-0", "doc-1"}.isdisjoint(d.id for d in retriever.invoke("capital"))


def test_the_same_chunk_twice_without_ids_is_one_document(colbert_engine: Engine) -> None:
    """Splitters repeat chunks (headers, boilerplate); without ids they are content-addressed, as
    add_texts does, so a repeat is stored once; ids given twice in one call are still refused."""
    retriever = PoolragColBERTRetriever(engine=colbert_engine)
    chunk = Document(page_content="Chapter 1", metadata={"source": "a.txt"})
    ids = retriever.add_documents([chunk, chunk, Document(page_content="Rome is in Italy.")])
    assert ids[0] == ids[1] != ids[2] and retriever.colbert.count() == 2
    assert retriever.add_texts(["Chapter 1"], [{"source": "a.txt"}]) == ids[:1]
    with pytest.raises(InvalidInputError, match="ids must be unique within one call"):
        retriever.add_documents([Document(page_content="a", id="x"), Document(page_content="b", id="x")])


def test_a_qdrant_collection_on_disk_is_searchable_after_reopening(
    colbert_engine: Engine, tmp_path: Path
) -> None:
    first = filled(open_store("qdrant", "docs", path=str(tmp_path / "qdrant")), engine=colbert_engine, k=3)
    query = "How do plants make sugar from light?"
    before = first.invoke(query)
    first.store.close()

    reopened = open_store("qdrant", "docs", path=str(tmp_path / "qdrant"))
    assert reopened.count() == len(TEXTS)
    after = PoolragColBERTRetriever(engine=colbert_engine, store=reopened, k=3).invoke(query)
    assert [d.id for d in after] == [d.id for d in before] and after[0].page_content == TEXTS[QUERIES[query]]
    reopened.close()


def test_collections_it_cannot_use_are_refused(colbert_engine: Engine, minilm_engine: Engine) -> None:
    dense = InMemoryStore()
    dense.ensure_collection(
        CollectionSpec("default", 96, colbert_engine.model_identity, 96, colbert_engine.model_name)
    )
    with pytest.raises(ValueError, match="single vectors"):
        PoolragColBERTRetriever(engine=colbert_engine, store=dense)
    with pytest.raises(ValueError, match="not a ColBERT"):
        PoolragColBERTRetriever(engine=minilm_engine)


def test_bad_arguments_are_refused(in_memory: PoolragColBERTRetriever, colbert_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="k must be"):
        in_memory.invoke("query", k=0)
    with pytest.raises(InvalidInputError, match="filter must be a mapping"):
        in_memory.invoke("query", filter=["topic"])
    with pytest.raises(InvalidInputError, match="empty list"):
        in_memory.invoke("query", filter={"topic": []})
    with pytest.raises(ValueError, match="Extra inputs"):
        PoolragColBERTRetriever(engine=colbert_engine, top_k=2)
    with pytest.raises(ValueError, match="poolrag vector store"):
        PoolragColBERTRetriever(engine=colbert_engine, store={"not": "a store"})
    with pytest.raises(InvalidInputError, match="equal lengths"):
        in_memory.add_texts(["a", "b"], metadatas=[{}])


def test_searches_a_colbert_collection_filled_by_poolrag_ingest(
    colbert_engine: Engine, tmp_path: Path
) -> None:
    from poolrag.ingest import ColbertEncoder, IngestPipeline, TokenChunker
    from poolrag.ingest import Document as Source
    from poolrag.stores import open_store

    store = open_store("qdrant", "ingested", path=str(tmp_path / "qdrant"))
    IngestPipeline(
        store,
        ColbertEncoder(colbert_engine),
        TokenChunker(colbert_engine.tokenizer, max_tokens=100),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run([Source(f"doc{i}.txt", t, dict(m)) for i, (t, m) in enumerate(zip(TEXTS, METADATAS, strict=True))])
    store.close()

    store = open_store("qdrant", "ingested", path=str(tmp_path / "qdrant"))
    retriever = PoolragColBERTRetriever(engine=colbert_engine, store=store, k=len(TEXTS))
    query = "Which programming language is easy to read?"
    documents = retriever.invoke(query)
    scores = engine_maxsim(colbert_engine, query)
    assert [d.metadata["source"] for d in documents] == [
        f"doc{i}.txt" for i in np.argsort(-scores, kind="stable")
    ]
    assert documents[0].page_content == TEXTS[QUERIES[query]]
    np.testing.assert_allclose([d.metadata["score"] for d in documents], np.sort(scores)[::-1], rtol=1e-5)
    only = retriever.invoke(query, filter={"source": "doc7.txt"})
    assert [d.page_content for d in only] == [TEXTS[7]]
    assert [d.metadata["topic"] for d in retriever.invoke(query, filter={"topic": "biology"})] == [
        "biology"
    ] * 2
    retriever.delete([documents[0].id])
    assert retriever.colbert.count() == len(TEXTS) - 1
    store.close()
