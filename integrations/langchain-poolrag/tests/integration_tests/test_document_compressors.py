"""PoolragReranker: by default the model's order and score (the engine's, a cross-encoder's sigmoid),
as CrossEncoderReranker and CohereRerank return them, whatever order the retriever handed over;
with second_stage="fuse" / "rrf" their fusion with the retriever's order or scores (computed by hand
here); top_n, metadata, async, remote, and use inside LangChain's ContextualCompressionRetriever."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_poolrag import PoolragEmbeddings, PoolragReranker

from poolrag import Engine, InputTypeError, InvalidInputError, PoolingParams
from poolrag.testing.partner_fixtures import loop_turns_until_done
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS


def corpus_documents() -> list[Document]:
    return [
        Document(page_content=t, metadata=dict(m), id=str(i))
        for i, (t, m) in enumerate(zip(TEXTS, METADATAS, strict=True))
    ]


def engine_scores(engine: Engine, query: str, texts: list[str]) -> np.ndarray:
    params = PoolingParams(truncate_prompt_tokens=-1)
    return np.asarray([out.outputs.score for out in engine.score(query, texts, params)])


@pytest.mark.parametrize("query", list(QUERIES)[:2])
def test_keeps_the_top_n_best_first_with_the_engines_scores(cross_encoder_engine: Engine, query: str) -> None:
    documents = corpus_documents()
    reranker = PoolragReranker(engine=cross_encoder_engine, top_n=3)  # the default: the model's own
    ranked = reranker.compress_documents(documents, query)
    scores = engine_scores(cross_encoder_engine, query, TEXTS)
    expected = list(np.argsort(-scores, kind="stable")[:3])
    assert [int(doc.id) for doc in ranked] == expected
    assert int(ranked[0].id) == QUERIES[query]  # the real cross-encoder finds the answer
    for doc in ranked:
        assert doc.metadata["relevance_score"] == pytest.approx(scores[int(doc.id)], abs=1e-6)
        assert doc.metadata["topic"] == METADATAS[int(doc.id)]["topic"]
    assert all("relevance_score" not in doc.metadata for doc in documents)  # inputs untouched
    assert all("rerank_score" not in doc.metadata for doc in ranked)  # nothing was fused


def test_by_default_the_models_pick_leads_whatever_the_retrievers_order(cross_encoder_engine: Engine) -> None:
    """The retriever handed the answer over last: the model's order and its sigmoid scores come back
    all the same (a fused default ranked a 0.93 pick below a 0.07 one, scored 0.0323 / 0.0323)."""
    query = "What is the capital of France?"
    documents = corpus_documents()[::-1]
    ranked = PoolragReranker(engine=cross_encoder_engine).compress_documents(documents, query)
    raw = engine_scores(cross_encoder_engine, query, [d.page_content for d in documents])
    order = list(np.argsort(-raw, kind="stable")[:3])
    assert [doc.id for doc in ranked] == [documents[i].id for i in order]
    assert int(ranked[0].id) == QUERIES[query]
    scores = [doc.metadata["relevance_score"] for doc in ranked]
    np.testing.assert_allclose(scores, raw[order], atol=1e-6)
    assert 0.9 < scores[0] < 1 and scores[1] < 0.5 and scores == sorted(scores, reverse=True)


def test_top_n_none_keeps_every_document_reordered(cross_encoder_engine: Engine) -> None:
    query = "What is the capital of France?"
    ranked = PoolragReranker(engine=cross_encoder_engine, top_n=None, score_key="ce").compress_documents(
        corpus_documents(), query
    )
    scores = [doc.metadata["ce"] for doc in ranked]
    assert len(ranked) == len(TEXTS) and scores == sorted(scores, reverse=True)


async def test_top_n_zero_keeps_none_as_cross_encoder_reranker_does(cross_encoder_engine: Engine) -> None:
    reranker = PoolragReranker(engine=cross_encoder_engine, top_n=0)
    assert reranker.compress_documents(corpus_documents(), "What is the capital of France?") == []
    assert await reranker.acompress_documents(corpus_documents(), "What is the capital of France?") == []
    with pytest.raises(InvalidInputError, match=r"^documents\[0\] is empty"):  # still checked first
        reranker.compress_documents([Document(page_content=" ")], "France")


def test_equal_scores_keep_the_retrievers_order(cross_encoder_engine: Engine) -> None:
    twins = [Document(page_content="Paris is in France.", id=name) for name in ("first", "second", "third")]
    ranked = PoolragReranker(engine=cross_encoder_engine, top_n=None).compress_documents(twins, "France")
    assert [doc.id for doc in ranked] == ["first", "second", "third"]


async def test_async_equals_sync(cross_encoder_engine: Engine) -> None:
    reranker = PoolragReranker(engine=cross_encoder_engine, top_n=4)
    query = "Which organelle produces energy in cells?"
    ranked = await reranker.acompress_documents(corpus_documents(), query)
    assert ranked == reranker.compress_documents(corpus_documents(), query)
    raw = engine_scores(cross_encoder_engine, query, TEXTS)
    np.testing.assert_allclose(
        [d.metadata["relevance_score"] for d in ranked], np.sort(raw)[::-1][:4], atol=1e-6
    )


async def test_async_reranking_does_not_block_the_event_loop(cross_encoder_engine: Engine) -> None:
    reranker = PoolragReranker(engine=cross_encoder_engine)
    turns, ranked = await loop_turns_until_done(
        reranker.acompress_documents(corpus_documents(), "capital of France")
    )
    assert turns >= 1 and len(ranked) == 3


async def test_remote_equals_in_process(cross_encoder_engine: Engine, cross_encoder_url: str) -> None:
    query = "How do plants make sugar from light?"
    local = PoolragReranker(engine=cross_encoder_engine, top_n=5).compress_documents(
        corpus_documents(), query
    )
    raw = engine_scores(cross_encoder_engine, query, TEXTS)
    np.testing.assert_allclose(
        [d.metadata["relevance_score"] for d in local], np.sort(raw)[::-1][:5], atol=1e-6
    )
    remote = PoolragReranker(base_url=cross_encoder_url, top_n=5)
    assert remote.compress_documents(corpus_documents(), query) == local
    assert await remote.acompress_documents(corpus_documents(), query) == local


@pytest.mark.parametrize("engine_fixture", ["minilm_engine", "colbert_engine"])
def test_bi_encoders_rerank_by_cosine_or_maxsim(engine_fixture: str, request: pytest.FixtureRequest) -> None:
    engine: Engine = request.getfixturevalue(engine_fixture)
    query = "Which programming language is easy to read?"
    reranker = PoolragReranker(engine=engine, top_n=2)
    ranked = reranker.compress_documents(corpus_documents(), query)
    scores = engine_scores(engine, query, TEXTS)
    assert [int(doc.id) for doc in ranked] == list(np.argsort(-scores, kind="stable")[:2])
    assert ranked[0].metadata["relevance_score"] == pytest.approx(scores.max(), abs=1e-5)


def test_in_a_contextual_compression_retriever(minilm_engine: Engine, cross_encoder_engine: Engine) -> None:
    store = InMemoryVectorStore.from_documents(corpus_documents(), PoolragEmbeddings(engine=minilm_engine))
    retriever = ContextualCompressionRetriever(
        base_compressor=PoolragReranker(engine=cross_encoder_engine, top_n=2),
        base_retriever=store.as_retriever(search_kwargs={"k": 5}),
    )
    query = "Which organelle produces energy in cells?"
    candidates = store.as_retriever(search_kwargs={"k": 5}).invoke(query)
    result = retriever.invoke(query)
    scores = engine_scores(cross_encoder_engine, query, [doc.page_content for doc in candidates])
    assert [doc.page_content for doc in result] == [
        candidates[i].page_content for i in np.argsort(-scores)[:2]
    ]
    assert result[0].page_content == TEXTS[QUERIES[query]]


def test_empty_input_and_bad_input(cross_encoder_engine: Engine) -> None:
    reranker = PoolragReranker(engine=cross_encoder_engine)
    assert reranker.compress_documents([], "anything") == []
    with pytest.raises(InputTypeError):
        reranker.compress_documents(corpus_documents(), None)  # type: ignore[arg-type]
    blank_page = [*corpus_documents()[:3], Document(page_content=" \n ")]
    with pytest.raises(InvalidInputError, match=r"^documents\[3\] is empty"):  # named as the caller knows it
        reranker.compress_documents(blank_page, "anything")
    with pytest.raises(InvalidInputError, match=r"^the query is empty"):
        reranker.compress_documents(corpus_documents(), "")
    # texts given as documents are named, where reading them failed on a missing page_content
    with pytest.raises(InputTypeError, match=r"^documents\[0\] is a str, not a Document; wrap it"):
        reranker.compress_documents(TEXTS[:2], "anything")  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"^documents\[0\] is a str, not a Document; wrap it"):
        asyncio.run(reranker.acompress_documents(TEXTS[:2], "anything"))  # type: ignore[arg-type]
    # a generator is read once: it failed as not subscriptable once scored (CrossEncoderReranker: [])
    query = next(iter(QUERIES))
    ranked = reranker.compress_documents((doc for doc in corpus_documents()), query)
    assert [d.id for d in ranked] == [d.id for d in reranker.compress_documents(corpus_documents(), query)]
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        PoolragReranker(engine=cross_encoder_engine, top_n=-1)
    with pytest.raises(ValueError, match="Extra inputs"):
        PoolragReranker(engine=cross_encoder_engine, top_k=2)  # a misspelt option is not ignored


def test_long_documents_are_cut_to_the_model_length_by_default(cross_encoder_engine: Engine) -> None:
    long_doc = Document(page_content="Paris is the capital of France. " + "filler text " * 1000)
    ranked = PoolragReranker(engine=cross_encoder_engine).compress_documents([long_doc], "capital of France")
    assert ranked[0].metadata["relevance_score"] == pytest.approx(
        engine_scores(cross_encoder_engine, "capital of France", [long_doc.page_content])[0], abs=1e-6
    )
    with pytest.raises(ValueError, match="maximum"):
        PoolragReranker(engine=cross_encoder_engine, truncate_prompt_tokens=None).compress_documents(
            [long_doc], "capital of France"
        )


def test_huggingface_cross_encoder_model_kwargs_carry_over(cross_encoder_engine: Engine) -> None:
    """``HuggingFaceCrossEncoder(model_name=..., model_kwargs=...)``'s arguments: the device and the
    other load options reach the engine, ``max_length`` cuts each pair as its ``CrossEncoder`` does."""
    folder = str(cross_encoder_engine.engine_args.model)
    long_doc = "Paris is the capital of France. " + "filler text " * 100
    reranker = PoolragReranker(
        model_name=folder, model_kwargs={"device": "cpu", "max_length": 16}, top_n=None
    )
    assert reranker.backend.device.type == "cpu"
    ranked = reranker.compress_documents([Document(page_content=long_doc)], "capital of France")
    cut = cross_encoder_engine.score(
        "capital of France", [long_doc], PoolingParams(truncate_prompt_tokens=16)
    )
    assert ranked[0].metadata["relevance_score"] == pytest.approx(cut[0].outputs.score, abs=1e-6)
    assert ranked[0].metadata["relevance_score"] != pytest.approx(
        engine_scores(cross_encoder_engine, "capital of France", [long_doc])[0], abs=1e-3
    )
    with pytest.raises(ValueError, match=r"model_kwargs \['num_labels'\] have no counterpart here"):
        PoolragReranker(model_name=folder, model_kwargs={"num_labels": 1})
    with pytest.raises(ValueError, match="max_length and truncate_prompt_tokens disagree"):
        PoolragReranker(model_name=folder, model_kwargs={"max_length": 16}, truncate_prompt_tokens=32)


def _z(values: list[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    return (x - x.mean()) / x.std()


def _ranks(values: list[float] | np.ndarray) -> np.ndarray:
    order = np.argsort(-np.asarray(values), kind="stable")
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def test_fuse_fuses_the_retrievers_order_by_reciprocal_rank(cross_encoder_engine: Engine) -> None:
    query = "What is the capital of France?"
    documents = corpus_documents()[::-1]  # the order the retriever handed over
    reranker = PoolragReranker(engine=cross_encoder_engine, top_n=4, second_stage="fuse")
    ranked = reranker.compress_documents(documents, query)
    raw = engine_scores(cross_encoder_engine, query, [d.page_content for d in documents])
    fused = 1 / (60 + np.arange(1, len(documents) + 1)) + 1 / (60 + _ranks(raw))
    order = list(np.argsort(-fused, kind="stable")[:4])
    assert [doc.id for doc in ranked] == [documents[i].id for i in order]
    np.testing.assert_allclose([d.metadata["relevance_score"] for d in ranked], fused[order], atol=1e-12)
    np.testing.assert_allclose([d.metadata["rerank_score"] for d in ranked], raw[order], atol=1e-6)


@pytest.mark.parametrize("second_stage", ["fuse", "rrf"])
async def test_a_named_metadata_score_is_fused_as_a_score(
    cross_encoder_engine: Engine, second_stage: str
) -> None:
    query = "Which organelle produces energy in cells?"
    documents = corpus_documents()
    for i, doc in enumerate(documents):
        doc.metadata["similarity"] = 0.05 * ((7 * i) % len(documents))
    first = [doc.metadata["similarity"] for doc in documents]
    reranker = PoolragReranker(
        engine=cross_encoder_engine,
        top_n=None,
        second_stage=second_stage,
        rerank_weight=0.3,
        first_stage_score_key="similarity",
    )
    raw = engine_scores(cross_encoder_engine, query, TEXTS)
    if second_stage == "fuse":
        expected = 0.7 * _z(first) + 0.3 * _z(raw)
    else:
        expected = 1.4 / (60 + _ranks(first)) + 0.6 / (60 + _ranks(raw))
    order = list(np.argsort(-expected, kind="stable"))
    for ranked in (
        reranker.compress_documents(documents, query),
        await reranker.acompress_documents(documents, query),
    ):
        assert [int(doc.id) for doc in ranked] == order
        np.testing.assert_allclose(
            [d.metadata["relevance_score"] for d in ranked], expected[order], atol=1e-6
        )


def test_a_named_score_key_must_be_in_every_document(cross_encoder_engine: Engine) -> None:
    documents = corpus_documents()
    reranker = PoolragReranker(
        engine=cross_encoder_engine, first_stage_score_key="similarity", second_stage="fuse"
    )
    with pytest.raises(InvalidInputError, match=r"documents\[0\].metadata\['similarity'\] is None"):
        reranker.compress_documents(documents, "capital")
    with pytest.raises(ValueError, match="less than or equal to 1"):
        PoolragReranker(engine=cross_encoder_engine, rerank_weight=1.5, second_stage="fuse")
    with pytest.raises(ValueError, match="second_stage"):
        PoolragReranker(engine=cross_encoder_engine, second_stage="mix")


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"rerank_weight": 0.7}, "rerank_weight"),
        ({"first_stage_score_key": "score"}, "first_stage_score_key"),
        (
            {"rerank_weight": 0.7, "first_stage_score_key": "score", "second_stage": "replace"},
            "rerank_weight and",
        ),
    ],
)
def test_a_fusion_setting_without_fusion_is_refused_by_name(setting: dict, named: str) -> None:
    # refused before any model is loaded: the path does not exist
    with pytest.raises(ValueError, match=f"{named}.*add second_stage='fuse'"):
        PoolragReranker(model_name="/nonexistent/cross-encoder", **setting)
