"""PoolragColBERTRetriever (LlamaIndex): MaxSim order and scores equal the engine's over the
in-memory and Qdrant stores, similarity_top_k, MetadataFilters, async and remote."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.vector_stores.types import FilterCondition, MetadataFilter, MetadataFilters
from llama_index.retrievers.poolrag import PoolragColBERTRetriever

from poolrag import Engine, InputTypeError, InvalidInputError
from poolrag.stores import open_store
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS

IDS = [f"node-{i}" for i in range(len(TEXTS))]
QUERY = "How do plants make sugar from light?"


def corpus_nodes() -> list[TextNode]:
    return [TextNode(id_=i, text=t, metadata=dict(m)) for i, t, m in zip(IDS, TEXTS, METADATAS, strict=True)]


def filled(**kwargs) -> PoolragColBERTRetriever:
    retriever = PoolragColBERTRetriever(**kwargs)
    assert retriever.add_nodes(corpus_nodes()) == IDS
    return retriever


@pytest.fixture(scope="module", params=["in_memory", "qdrant"])
def retriever(
    request: pytest.FixtureRequest, colbert_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> PoolragColBERTRetriever:
    if request.param == "qdrant":
        store = open_store("qdrant", "colbert", path=str(tmp_path_factory.mktemp("qdrant")))
        return filled(engine=colbert_engine, store=store, similarity_top_k=len(TEXTS))
    return filled(engine=colbert_engine, similarity_top_k=len(TEXTS))


def test_scores_and_order_are_the_engines_maxsim(
    retriever: PoolragColBERTRetriever, colbert_engine: Engine
) -> None:
    nodes = retriever.retrieve(QUERY)
    scores = np.asarray([out.outputs.score for out in colbert_engine.score(QUERY, TEXTS)])
    assert [n.node.node_id for n in nodes] == [IDS[i] for i in np.argsort(-scores, kind="stable")]
    assert nodes[0].node.get_content() == TEXTS[QUERIES[QUERY]]
    np.testing.assert_allclose([n.score for n in nodes], np.sort(scores)[::-1], rtol=1e-5)
    assert nodes[0].node.metadata == METADATAS[QUERIES[QUERY]]


def test_top_k_and_metadata_filters(retriever: PoolragColBERTRetriever) -> None:
    everything = [n.node.node_id for n in retriever.retrieve(QUERY)]
    retriever.similarity_top_k = 2
    try:
        assert [n.node.node_id for n in retriever.retrieve(QUERY)] == everything[:2]
        retriever.filters = MetadataFilters(
            filters=[
                MetadataFilter(key="topic", value=["geography", "cooking"], operator="in"),
                MetadataFilter(key="year", value=2020),
            ],
            condition=FilterCondition.AND,
        )
        expected = [i for i in everything if METADATAS[IDS.index(i)]["topic"] in ("geography", "cooking")]
        expected = [i for i in expected if METADATAS[IDS.index(i)]["year"] == 2020]
        assert [n.node.node_id for n in retriever.retrieve(QUERY)] == expected[:2] and len(expected) == 2
        retriever.filters = {"topic": "biology"}
        assert {n.node.node_id for n in retriever.retrieve(QUERY)} == {"node-2", "node-3"}
    finally:
        retriever.similarity_top_k, retriever.filters = len(TEXTS), None


def test_filters_it_cannot_evaluate_exactly_are_refused(retriever: PoolragColBERTRetriever) -> None:
    retriever.filters = MetadataFilters(filters=[MetadataFilter(key="year", value=2020, operator=">")])
    try:
        with pytest.raises(InvalidInputError, match="'==' and 'in'"):
            retriever.retrieve(QUERY)
        retriever.filters = MetadataFilters(
            filters=[MetadataFilter(key="year", value=2020), MetadataFilter(key="topic", value="biology")],
            condition=FilterCondition.OR,
        )
        with pytest.raises(InvalidInputError, match="AND only"):
            retriever.retrieve(QUERY)
    finally:
        retriever.filters = None


def test_async_add_and_retrieve_and_remote_equal_in_process(
    colbert_engine: Engine, colbert_url: str, retriever: PoolragColBERTRetriever
) -> None:
    expected = retriever.retrieve(QUERY)

    async def run_async() -> list:
        fresh = PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=len(TEXTS))
        await fresh.aadd_nodes(corpus_nodes())
        return await fresh.aretrieve(QUERY)

    remote = filled(base_url=colbert_url, similarity_top_k=len(TEXTS))
    for nodes in (asyncio.run(run_async()), remote.retrieve(QUERY), asyncio.run(remote.aretrieve(QUERY))):
        assert [n.node.node_id for n in nodes] == [n.node.node_id for n in expected]
        np.testing.assert_allclose([n.score for n in nodes], [n.score for n in expected], rtol=1e-5)


def test_a_node_comes_back_as_it_went_in(colbert_engine: Engine, tmp_path) -> None:
    """What LlamaIndex's own vector stores give back: the source document, hidden metadata keys
    and offsets survive, so metadata the user kept from the LLM stays out of its prompt."""
    document = Document(
        text="Paris is the capital of France. It is big.",
        metadata={"file": "a.txt", "secret": "x"},
        excluded_llm_metadata_keys=["secret"],
        excluded_embed_metadata_keys=["secret"],
    )
    (node,) = SentenceSplitter(chunk_size=64, chunk_overlap=0).get_nodes_from_documents([document])
    for store in (None, open_store("qdrant", "nodes", path=str(tmp_path / "qdrant"))):
        retriever = PoolragColBERTRetriever(engine=colbert_engine, store=store, similarity_top_k=1)
        retriever.add_nodes([node])
        (found,) = retriever.retrieve("capital of France")
        back, llm = found.node, MetadataMode.LLM
        assert (back.node_id, back.ref_doc_id) == (node.node_id, document.doc_id)
        assert back.metadata == node.metadata
        assert (back.start_char_idx, back.end_char_idx) == (node.start_char_idx, node.end_char_idx)
        assert back.get_content(metadata_mode=llm) == node.get_content(metadata_mode=llm)
        assert "secret" not in back.get_content(metadata_mode=llm)
        # filters still read the metadata as the user wrote it
        other_file = MetadataFilters(filters=[MetadataFilter(key="file", value="b.txt")])
        filtered = PoolragColBERTRetriever(engine=colbert_engine, store=retriever.store, filters=other_file)
        assert filtered.retrieve("capital") == []


def test_an_index_node_comes_back_an_index_node_so_a_recursive_retriever_follows_it(
    colbert_engine: Engine,
) -> None:
    """As LlamaIndex's vector stores rebuild a node by its stored type: an ``IndexNode`` keeps its
    ``index_id``, so a ``RecursiveRetriever`` goes on to the retriever it names; an unknown type
    name is a ``TextNode`` (the stored name picks among LlamaIndex's node classes, nothing else)."""
    from llama_index.core.retrievers import RecursiveRetriever
    from llama_index.core.schema import IndexNode

    leaf = PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=1)
    leaf.add_nodes([TextNode(id_="leaf", text="The Eiffel Tower is 330 metres tall.")])
    top = PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=1)
    top.add_nodes([IndexNode(id_="summary", text="How tall is the Eiffel Tower?", index_id="towers")])
    (found,) = top.retrieve("Eiffel Tower height")
    assert type(found.node) is IndexNode and found.node.index_id == "towers"
    recursive = RecursiveRetriever("top", retriever_dict={"top": top, "towers": leaf})
    assert [n.node.node_id for n in recursive.retrieve("Eiffel Tower height")] == ["leaf"]

    top.colbert.add_texts(
        ["Paris is in France."],
        [{"_node_content": TextNode(text="x").to_json(), "_node_type": "os.system"}],
    )
    assert type(top.retrieve("Paris is in France")[0].node) is TextNode


def test_stored_node_json_that_does_not_parse_gives_the_text(colbert_engine: Engine) -> None:
    """A record written by another tool with a ``_node_content`` field of its own: the text and
    metadata come back as a TextNode, and the search goes on."""
    retriever = PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=1)
    (record_id,) = retriever.colbert.add_texts(["Paris is in France."], [{"_node_content": "{not json"}])
    (found,) = retriever.retrieve("Paris")
    assert type(found.node) is TextNode and found.node.node_id == record_id
    assert found.node.get_content(metadata_mode=MetadataMode.NONE) == "Paris is in France."


def test_delete_and_bad_arguments(colbert_engine: Engine, minilm_engine: Engine) -> None:
    retriever = filled(engine=colbert_engine, similarity_top_k=3)
    retriever.delete_nodes(["node-3"])
    assert "node-3" not in {n.node.node_id for n in retriever.retrieve(QUERY)}
    with pytest.raises(InvalidInputError, match="similarity_top_k"):
        PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=0)
    with pytest.raises(InvalidInputError, match="poolrag vector store"):
        PoolragColBERTRetriever(engine=colbert_engine, store=[])
    with pytest.raises(InvalidInputError, match="not a ColBERT"):
        PoolragColBERTRetriever(engine=minilm_engine)
    # similarity_top_k is named as the user set it, also when set as an attribute after building
    with pytest.raises(InvalidInputError, match="similarity_top_k must be a positive integer, not None"):
        PoolragColBERTRetriever(engine=colbert_engine, similarity_top_k=None)  # type: ignore[arg-type]
    retriever.similarity_top_k = 0
    with pytest.raises(InvalidInputError, match=r"^similarity_top_k must be a positive integer, not 0"):
        retriever.retrieve(QUERY)
    with pytest.raises(InvalidInputError, match=r"^similarity_top_k must be a positive integer, not 0"):
        asyncio.run(retriever.aretrieve(QUERY))
    retriever.similarity_top_k = 3
    # what is not a list of nodes is named, not an AttributeError from deep inside
    with pytest.raises(InputTypeError, match=r"^nodes\[1\] must be a LlamaIndex node .* not str"):
        retriever.add_nodes([TextNode(text="Paris"), "Berlin"])  # type: ignore[list-item]
    with pytest.raises(InputTypeError, match="not one TextNode"):
        retriever.add_nodes(TextNode(text="Paris"))  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="not one str"):
        asyncio.run(retriever.aadd_nodes("Paris"))  # type: ignore[arg-type]
