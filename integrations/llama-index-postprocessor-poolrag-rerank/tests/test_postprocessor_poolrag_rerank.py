"""PoolragRerank: by default the model's order and score (the engine's, a cross-encoder's sigmoid),
as SentenceTransformerRerank returns them, whatever the retrieval scores; with second_stage="fuse"
their fusion with the nodes' retrieval scores (z-scores; by order when nodes come without scores;
computed by hand here); top_n, retrieval scores, metadata mode, async, remote and bad input."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.poolrag_rerank import PoolragRerank
from pydantic import Field

from poolrag import Engine, InputTypeError, InvalidInputError
from poolrag.testing.rag_corpus import METADATAS, QUERIES, TEXTS

QUERY = "What is the capital of France?"


def corpus_nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=t, metadata=dict(m)), score=0.1 * i)
        for i, (t, m) in enumerate(zip(TEXTS, METADATAS, strict=True))
    ]


def engine_scores(engine: Engine, query: str, texts: list[str]) -> np.ndarray:
    return np.asarray([out.outputs.score for out in engine.score(query, texts)])


def test_keeps_top_n_best_first_with_the_engines_scores(cross_encoder_engine: Engine) -> None:
    nodes = corpus_nodes()
    ranked = PoolragRerank(
        engine=cross_encoder_engine, top_n=3, metadata_mode=MetadataMode.NONE
    ).postprocess_nodes(nodes, query_str=QUERY)
    scores = engine_scores(cross_encoder_engine, QUERY, TEXTS)
    assert [n.node.node_id for n in ranked] == [f"n{i}" for i in np.argsort(-scores, kind="stable")[:3]]
    assert ranked[0].node.get_content() == TEXTS[QUERIES[QUERY]]
    np.testing.assert_allclose([n.score for n in ranked], np.sort(scores)[::-1][:3], rtol=1e-6)
    assert [n.score for n in nodes] == [0.1 * i for i in range(len(TEXTS))]  # inputs untouched


def test_by_default_the_retrieval_scores_change_nothing(cross_encoder_engine: Engine) -> None:
    """The retriever scored the answer lowest: the model's order and its sigmoid scores come back
    all the same, as SentenceTransformerRerank gives them."""
    nodes = corpus_nodes()
    answer = QUERIES[QUERY]
    nodes[answer] = NodeWithScore(node=nodes[answer].node, score=-5.0)
    rerank = PoolragRerank(engine=cross_encoder_engine, top_n=None, metadata_mode=MetadataMode.NONE)
    raw = engine_scores(cross_encoder_engine, QUERY, TEXTS)
    order = np.argsort(-raw, kind="stable")
    for ranked in (
        rerank.postprocess_nodes(nodes, query_str=QUERY),
        asyncio.run(rerank.apostprocess_nodes(nodes, query_str=QUERY)),
    ):
        assert [n.node.node_id for n in ranked] == [f"n{i}" for i in order]
        np.testing.assert_allclose([n.score for n in ranked], raw[order], atol=1e-6)
        assert ranked[0].node.node_id == f"n{answer}" and 0.9 < ranked[0].score < 1 and ranked[1].score < 0.5


def test_by_default_the_node_is_scored_with_its_embed_metadata(cross_encoder_engine: Engine) -> None:
    nodes = corpus_nodes()
    ranked = PoolragRerank(engine=cross_encoder_engine, top_n=None).postprocess_nodes(
        nodes, QueryBundle(QUERY)
    )
    texts = [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    assert "topic: geography" in texts[0]
    scores = engine_scores(cross_encoder_engine, QUERY, texts)
    assert [n.node.node_id for n in ranked] == [f"n{i}" for i in np.argsort(-scores, kind="stable")]


def test_keep_retrieval_score_copies_the_nodes(cross_encoder_engine: Engine) -> None:
    nodes = corpus_nodes()
    ranked = PoolragRerank(engine=cross_encoder_engine, top_n=2, keep_retrieval_score=True).postprocess_nodes(
        nodes, query_str=QUERY
    )
    by_id = {n.node.node_id: n.score for n in nodes}
    for n in ranked:
        assert n.node.metadata["retrieval_score"] == by_id[n.node.node_id]
    assert all("retrieval_score" not in n.node.metadata for n in nodes)


def test_async_equals_sync_and_remote_equals_in_process(
    cross_encoder_engine: Engine, cross_encoder_url: str
) -> None:
    local = PoolragRerank(engine=cross_encoder_engine, top_n=4)
    remote = PoolragRerank(base_url=cross_encoder_url, top_n=4)
    expected = local.postprocess_nodes(corpus_nodes(), query_str=QUERY)
    texts = [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in corpus_nodes()]
    raw = engine_scores(cross_encoder_engine, QUERY, texts)
    np.testing.assert_allclose([n.score for n in expected], np.sort(raw)[::-1][:4], atol=1e-6)
    for ranked in (
        asyncio.run(local.apostprocess_nodes(corpus_nodes(), query_str=QUERY)),
        remote.postprocess_nodes(corpus_nodes(), query_str=QUERY),
        asyncio.run(remote.apostprocess_nodes(corpus_nodes(), query_str=QUERY)),
    ):
        assert [n.node.node_id for n in ranked] == [n.node.node_id for n in expected]
        np.testing.assert_allclose([n.score for n in ranked], [n.score for n in expected], atol=1e-6)


def test_empty_and_bad_input(cross_encoder_engine: Engine) -> None:
    rerank = PoolragRerank(engine=cross_encoder_engine)
    assert rerank.postprocess_nodes([], query_str=QUERY) == []
    with pytest.raises(InvalidInputError, match="needs the query"):
        rerank.postprocess_nodes(corpus_nodes())
    blank = [*corpus_nodes()[:2], NodeWithScore(node=TextNode(text=""), score=0.1)]
    with pytest.raises(InvalidInputError, match=r"^documents\[2\] is empty$"):  # named as the caller knows it
        rerank.postprocess_nodes(blank, query_str=QUERY)
    # the mix-ups LlamaIndex makes easy are named, where SentenceTransformerRerank's AttributeError
    # ('TextNode' object has no attribute 'node') left the reader to guess
    parsed = [n.node for n in corpus_nodes()]
    with pytest.raises(InputTypeError, match=r"^nodes\[0\] is a TextNode, not a NodeWithScore"):
        rerank.postprocess_nodes(parsed, query_str=QUERY)
    with pytest.raises(InputTypeError, match=r"^nodes\[0\] is a TextNode, not a NodeWithScore"):
        asyncio.run(rerank.apostprocess_nodes(parsed, query_str=QUERY))
    with pytest.raises(
        InputTypeError, match=r"^query_bundle must be a QueryBundle, not str; pass a string as"
    ):
        rerank.postprocess_nodes(corpus_nodes(), query_bundle=QUERY)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        PoolragRerank(engine=cross_encoder_engine, top_n=-1)
    with pytest.raises(ValueError, match="Extra inputs"):
        PoolragRerank(engine=cross_encoder_engine, top_k=2)  # a misspelt option is not ignored
    # top_n=0 keeps none, as SentenceTransformerRerank's slice does
    none = PoolragRerank(engine=cross_encoder_engine, top_n=0)
    assert none.postprocess_nodes(corpus_nodes(), query_str=QUERY) == []


def test_sentence_transformer_rerank_arguments_run_unchanged(assets, cross_encoder_engine: Engine) -> None:
    """LlamaIndex's SentenceTransformerRerank call, with the class name swapped: model=, device= and
    trust_remote_code= load the same model and rank as the engine does."""
    folder = str(assets / "ms-marco-MiniLM-L-12-v2")
    rerank = PoolragRerank(
        model=folder, top_n=3, device="cpu", trust_remote_code=False, keep_retrieval_score=True
    )
    assert rerank.model_name == folder and rerank.backend.engine_args.device == "cpu"
    assert rerank.model == folder  # the field SentenceTransformerRerank's users read the name from
    ranked = rerank.postprocess_nodes(corpus_nodes(), query_str=QUERY)
    reference = PoolragRerank(engine=cross_encoder_engine, top_n=3)
    expected = reference.postprocess_nodes(corpus_nodes(), query_str=QUERY)
    assert [n.node.node_id for n in ranked] == [n.node.node_id for n in expected]
    np.testing.assert_allclose([n.score for n in ranked], [n.score for n in expected], atol=1e-6)
    assert all("retrieval_score" in n.node.metadata for n in ranked)
    with pytest.raises(ValueError, match="model and model_name disagree"):
        PoolragRerank(model=folder, model_name="another/model")


def test_its_cross_encoder_kwargs_and_cache_folder_are_taken(assets, tmp_path) -> None:
    """SentenceTransformerRerank(cache_folder=..., cross_encoder_kwargs={"max_length": ...}), the
    way its users set the cut and the download folder (it was 'Extra inputs are not permitted')."""
    folder = str(assets / "ms-marco-MiniLM-L-12-v2")
    kwargs = {"max_length": 64, "trust_remote_code": False, "revision": "main"}
    rerank = PoolragRerank(model=folder, cache_folder=str(tmp_path), cross_encoder_kwargs=kwargs)
    assert rerank.max_length == 64
    assert rerank.backend.engine_args.download_dir == str(tmp_path)
    assert rerank.backend.engine_args.revision == "main"
    with pytest.raises(ValueError, match="give device and model as arguments"):
        PoolragRerank(model=folder, cross_encoder_kwargs={"device": "cpu"})
    with pytest.raises(ValueError, match="cross_encoder_kwargs: num_labels not taken here"):
        PoolragRerank(model=folder, cross_encoder_kwargs={"num_labels": 2})


def test_pairs_are_cut_at_512_tokens_as_sentence_transformer_rerank_cuts_them(minilm_path, tmp_path) -> None:
    """SentenceTransformerRerank builds ``CrossEncoder(max_length=512)``: a long-context reranker
    reads 512 tokens of each pair there, and here by default; ``max_length=None`` reads them all."""
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from transformers import AutoTokenizer

    from poolrag.testing.tiny_models import build_encoder

    folder = build_encoder(
        tmp_path / "long-ce",
        "bert",
        minilm_path,
        head="sequence",
        num_labels=1,
        max_position_embeddings=1024,
        initializer_range=0.3,  # weights large enough that content moves the score
    )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.model_max_length = 1024
    tokenizer.save_pretrained(folder)
    # the same first 520 tokens, then different ones: cut at 512, the two pairs are one and the same
    long_texts = ["paris " * 520 + "ocean " * 300, "paris " * 520 + "music " * 300]
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=0.0) for i, t in enumerate(long_texts)]
    assert len(tokenizer(long_texts[0])["input_ids"]) == 822

    def scores(reranker) -> list[float]:
        ranked = reranker.postprocess_nodes(list(nodes), query_str=QUERY)
        return [score for _, score in sorted((n.node.node_id, n.score) for n in ranked)]

    reference = scores(SentenceTransformerRerank(model=str(folder), top_n=2, device="cpu"))
    assert reference[0] == pytest.approx(reference[1], abs=1e-6)
    ours = PoolragRerank(model=str(folder), top_n=2)
    assert ours.max_length == 512
    assert scores(ours) == pytest.approx(reference, abs=1e-5)
    ranked = asyncio.run(ours.apostprocess_nodes(list(nodes), query_str=QUERY))
    assert [n.score for n in ranked] == pytest.approx(reference, abs=1e-5)
    whole = scores(PoolragRerank(engine=ours.backend, top_n=2, max_length=None))
    assert abs(whole[0] - whole[1]) > 1e-4  # read past 512 tokens, the two differ


def _z(values: list[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    return (x - x.mean()) / x.std()


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


@pytest.mark.parametrize("weight", [None, 0.8])
def test_fuse_mixes_retrieval_scores_and_the_models_as_z_scores(
    cross_encoder_engine: Engine, weight: float | None
) -> None:
    nodes = corpus_nodes()
    settings = {} if weight is None else {"rerank_weight": weight}
    rerank = PoolragRerank(
        engine=cross_encoder_engine, top_n=3, metadata_mode=MetadataMode.NONE, second_stage="fuse", **settings
    )
    share = 0.5 if weight is None else weight
    raw = engine_scores(cross_encoder_engine, QUERY, TEXTS)
    expected = (1 - share) * _z([n.score for n in nodes]) + share * _z(raw)
    order = list(np.argsort(-expected, kind="stable")[:3])
    for ranked in (
        rerank.postprocess_nodes(nodes, query_str=QUERY),
        asyncio.run(rerank.apostprocess_nodes(corpus_nodes(), query_str=QUERY)),
    ):
        assert [n.node.node_id for n in ranked] == [f"n{i}" for i in order]
        np.testing.assert_allclose([n.score for n in ranked], expected[order], atol=1e-6)


def test_fused_nodes_without_scores_are_fused_by_their_order(cross_encoder_engine: Engine) -> None:
    nodes = [NodeWithScore(node=n.node, score=None) for n in corpus_nodes()][::-1]
    texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
    ranked = PoolragRerank(
        engine=cross_encoder_engine, top_n=None, metadata_mode=MetadataMode.NONE, second_stage="fuse"
    ).postprocess_nodes(nodes, query_str=QUERY)
    raw = engine_scores(cross_encoder_engine, QUERY, texts)
    expected = 1 / (60 + np.arange(1, len(nodes) + 1)) + 1 / (60 + _ranks(raw))
    order = list(np.argsort(-expected, kind="stable"))
    assert [n.node.node_id for n in ranked] == [nodes[i].node.node_id for i in order]
    np.testing.assert_allclose([n.score for n in ranked], expected[order], atol=1e-12)


def test_second_stage_settings_are_checked(cross_encoder_engine: Engine) -> None:
    with pytest.raises(ValueError, match="less than or equal to 1"):
        PoolragRerank(engine=cross_encoder_engine, rerank_weight=1.5, second_stage="fuse")
    with pytest.raises(ValueError, match="second_stage"):
        PoolragRerank(engine=cross_encoder_engine, second_stage="mix")
    # a share without fusion would change nothing: named, before any model is loaded
    with pytest.raises(ValueError, match=r"rerank_weight .* add second_stage='fuse'"):
        PoolragRerank(model_name="/nonexistent/cross-encoder", rerank_weight=0.7)


def test_a_two_model_server_reranks_with_the_model_named(
    cross_encoder_engine: Engine, embedder_and_reranker_url: str
) -> None:
    local = PoolragRerank(engine=cross_encoder_engine, top_n=4)
    remote = PoolragRerank(base_url=embedder_and_reranker_url, model_name="reranker", top_n=4)
    expected = local.postprocess_nodes(corpus_nodes(), query_str=QUERY)
    ranked = remote.postprocess_nodes(corpus_nodes(), query_str=QUERY)
    assert [n.node.node_id for n in ranked] == [n.node.node_id for n in expected]
    np.testing.assert_allclose([n.score for n in ranked], [n.score for n in expected], rtol=1e-6)


class _RerankEvents(BaseEventHandler):
    seen: list[BaseEvent] = Field(default_factory=list)

    def handle(self, event: BaseEvent, **kwargs: object) -> None:
        if isinstance(event, (ReRankStartEvent, ReRankEndEvent)):
            self.seen.append(event)


def test_each_call_emits_llamaindex_reranking_events_for_tracing(cross_encoder_engine: Engine) -> None:
    """The callback manager's RERANKING event and the instrumentation dispatcher's start and end
    events, as LlamaIndex's own rerankers emit them, sync and async alike."""
    debug = LlamaDebugHandler()
    rerank = PoolragRerank(engine=cross_encoder_engine, top_n=2, callback_manager=CallbackManager([debug]))
    events = _RerankEvents()
    root = get_dispatcher()
    root.add_event_handler(events)
    try:
        ranked = rerank.postprocess_nodes(corpus_nodes(), query_str=QUERY)
        aranked = asyncio.run(rerank.apostprocess_nodes(corpus_nodes(), query_str=QUERY))
    finally:
        root.event_handlers.remove(events)
    pairs = debug.get_event_pairs(CBEventType.RERANKING)
    assert len(pairs) == 2
    for (start, end), result in zip(pairs, [ranked, aranked], strict=True):
        assert start.payload[EventPayload.QUERY_STR] == QUERY and start.payload[EventPayload.TOP_K] == 2
        assert len(start.payload[EventPayload.NODES]) == len(TEXTS)
        assert end.payload[EventPayload.NODES] == result
    assert [type(e) for e in events.seen] == [ReRankStartEvent, ReRankEndEvent] * 2
    # the start event's query is the QueryBundle, as sentence-transformers' reranker sends it
    assert [e.query.query_str for e in events.seen[::2]] == [QUERY, QUERY]
    assert events.seen[1].nodes == ranked and events.seen[3].nodes == aranked


def test_async_reranking_runs_in_a_span_of_its_own(cross_encoder_engine: Engine) -> None:
    """Tracers (Arize, Langfuse) make a reranker step of the span a postprocessor's call opens and
    hang its rerank events there. SentenceTransformerRerank's async call runs its spanned
    ``_postprocess_nodes`` in a thread; the native async call must open its own span too, or its
    events land in the query engine's span and the trace shows no reranking step."""
    rerank = PoolragRerank(engine=cross_encoder_engine, top_n=2)
    events = _RerankEvents()
    root = get_dispatcher()
    root.add_event_handler(events)
    try:
        rerank.postprocess_nodes(corpus_nodes(), query_str=QUERY)
        asyncio.run(rerank.apostprocess_nodes(corpus_nodes(), query_str=QUERY))
    finally:
        root.event_handlers.remove(events)
    spans = [str(e.span_id).split("-")[0] for e in events.seen]
    assert spans == ["PoolragRerank._postprocess_nodes"] * 2 + ["PoolragRerank._apostprocess_nodes"] * 2
