"""Issue 45, item 2, over HTTP: a 200-text batch holding 277-token paragraphs (all-MiniLM-L6-v2
reads 256) succeeds through the clients users bring (``openai``, LangChain's ``OpenAIEmbeddings``,
``cohere``, TEI's ``/embed``) with the vectors of ``Engine.embed_array`` and sentence-transformers;
the answer and ``/metrics`` count the inputs cut; ``poolrag serve --no-auto-truncate`` and a
request's ``truncate: false`` (Cohere's ``truncate: "NONE"``) refuse with today's error.
Cross-encoder pairs are cut on ``/score`` and ``/rerank`` as ``Engine.score`` cuts them.

The batch is 20 distinct texts (16 paragraphs, 4 short ones) ten times over in shuffled order: the
engine computes each distinct text once, so the 200 inputs cost little while every position is
still checked against its own vector.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cohere
import httpx
import numpy as np
import openai
import pytest

from poolrag import Engine, PoolingParams
from poolrag.cli import build_parser
from poolrag.cli.serve import engine_args_of
from poolrag.client import PoolragClient
from poolrag.client.errors import RemoteInvalidInputError
from poolrag.server.truncation_report import TRUNCATED_INPUTS_HEADER
from poolrag.testing.long_texts import long_batch, long_paragraph, sentence_transformers_vectors

from .conftest import MINILM_NAMES, Served, metric_samples, serve_in_thread

QUERY = "How do honeybees share where food is?"


@pytest.fixture(scope="module")
def batch(minilm_engine: Engine) -> list[str]:
    return long_batch(minilm_engine.tokenizer)


@pytest.fixture(scope="module")
def long_count(batch: list[str], minilm_engine: Engine) -> int:
    return sum(len(minilm_engine.tokenize(text)) > minilm_engine.max_model_len for text in batch)


@pytest.fixture(scope="module")
def expected(minilm_engine: Engine, minilm_path: Path, batch: list[str]) -> np.ndarray:
    """``Engine.embed_array`` of the batch, checked once against sentence-transformers."""
    vectors = minilm_engine.embed_array(batch)
    np.testing.assert_allclose(vectors, sentence_transformers_vectors(batch, minilm_path), rtol=0, atol=1e-6)
    return vectors


@pytest.fixture(scope="module")
def refusing_server(minilm_path: Path, minilm_engine: Engine) -> Iterator[Served]:
    """The engine ``poolrag serve MODEL --no-auto-truncate`` builds from its flags, served (in a
    thread: a second server process would only load the same model again)."""
    args = build_parser().parse_args(["serve", str(minilm_path), "--no-auto-truncate"])
    engine_args = engine_args_of(args)
    assert engine_args.truncate is False
    with serve_in_thread(Engine.from_engine_args(engine_args), served_model_names=("minilm",)) as url:
        yield Served(url, "minilm", minilm_engine)


def _openai(server: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)


def _cohere(server: Served) -> cohere.ClientV2:
    return cohere.ClientV2(base_url=server.url, api_key="unused", timeout=300)


def _truncated_total(server: Served) -> float:
    samples = metric_samples(server.url)
    return samples.get(("poolrag_engine_truncated_inputs_total", (("model", MINILM_NAMES[0]),)), 0.0)


# -- the default: cut, counted, the engine's vectors ------------------------------------------------------
def test_the_openai_client_gets_every_vector_of_a_long_batch(
    minilm_server: Served, batch: list[str], expected: np.ndarray, long_count: int
) -> None:
    assert len(batch) == 200 and long_count == 160
    before = _truncated_total(minilm_server)
    raw = _openai(minilm_server).embeddings.with_raw_response.create(
        model=minilm_server.model, input=batch, encoding_format="float"
    )
    response = raw.parse()
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert raw.headers[TRUNCATED_INPUTS_HEADER] == "160"
    tokens = sum(min(len(minilm_server.engine.tokenize(t)), 256) for t in batch)
    assert response.usage.prompt_tokens == tokens
    assert _truncated_total(minilm_server) - before == 160


def test_langchains_openai_embeddings_get_every_vector(
    minilm_server: Served, batch: list[str], expected: np.ndarray
) -> None:
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=minilm_server.model,
        base_url=f"{minilm_server.url}/v1",
        api_key="unused",
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    got = np.array(embeddings.embed_documents(batch), dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_the_cohere_client_gets_every_vector_and_a_warning(
    minilm_server: Served, batch: list[str], expected: np.ndarray
) -> None:
    response = _cohere(minilm_server).embed(
        texts=batch, model=minilm_server.model, input_type="search_document", embedding_types=["float"]
    )
    got = np.array(response.embeddings.float_, dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert response.meta.warnings == ["160 of 200 texts were truncated to the model's maximum length"]


def test_teis_embed_route_gets_every_vector_cut_as_the_server_cuts(
    minilm_server: Served, batch: list[str], expected: np.ndarray, http: httpx.Client
) -> None:
    """TEI's clients leave ``truncate`` unset: the server's auto-truncate decides, as in TEI."""
    answer = http.post(f"{minilm_server.url}/embed", json={"inputs": batch}, timeout=300)
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(np.array(answer.json(), dtype=np.float32), expected, rtol=0, atol=1e-6)
    assert answer.headers[TRUNCATED_INPUTS_HEADER] == "160"


def test_a_short_batch_says_nothing_was_cut(minilm_server: Served, http: httpx.Client) -> None:
    answer = http.post(f"{minilm_server.url}/v1/embeddings", json={"input": ["bees", "tides"]})
    assert answer.status_code == 200 and answer.headers[TRUNCATED_INPUTS_HEADER] == "0"
    cohere_answer = http.post(f"{minilm_server.url}/v2/embed", json={"texts": ["bees"]}).json()
    assert cohere_answer["meta"].get("warnings") is None


def test_an_over_long_pair_is_cut_on_score_and_rerank_as_engine_score_cuts_it(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    engine = cross_encoder_server.engine
    documents = [long_paragraph(engine.tokenizer, 5, tokens=engine.max_model_len + 60), "Bees dance."]
    expected = [s.outputs.score for s in engine.score(QUERY, documents)]
    url = cross_encoder_server.url
    scored = http.post(f"{url}/score", json={"text_1": QUERY, "text_2": documents})
    assert scored.status_code == 200, scored.text
    assert scored.headers[TRUNCATED_INPUTS_HEADER] == "1"
    np.testing.assert_allclose([d["score"] for d in scored.json()["data"]], expected, rtol=0, atol=1e-6)
    reranked = _cohere(cross_encoder_server).rerank(
        model=cross_encoder_server.model, query=QUERY, documents=documents
    )
    by_index = {r.index: r.relevance_score for r in reranked.results}
    np.testing.assert_allclose([by_index[0], by_index[1]], expected, rtol=0, atol=1e-6)
    for path, body in (
        ("/score", {"text_1": QUERY, "text_2": documents}),
        ("/rerank", {"query": QUERY, "documents": documents}),
    ):
        refused = http.post(f"{url}{path}", json={**body, "truncate": False})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "context_length_exceeded"


def test_an_over_long_pair_refused_names_its_text_in_the_routes_fields(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """The refusal names the long text as a single text's does (``documents[1]``), not ``input``, a
    field /score and /rerank do not have, with no position among a client's documents."""
    engine = cross_encoder_server.engine
    long = long_paragraph(engine.tokenizer, 5, tokens=engine.max_model_len + 60)
    url = cross_encoder_server.url
    for path, body, where in (
        ("/score", {"text_1": QUERY, "text_2": ["Bees dance.", long]}, "text_2[1]"),
        ("/score", {"text_1": [QUERY, long], "text_2": ["Bees dance.", "Tides."]}, "text_1[1]"),
        ("/rerank", {"query": QUERY, "documents": ["Bees dance.", long]}, "documents[1]"),
        ("/rerank", {"query": long, "documents": ["Bees dance.", "Tides."]}, "query"),
    ):
        refused = http.post(f"{url}{path}", json={**body, "truncate": False})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert error["message"].startswith(f"{where} has "), error["message"]
        assert error["param"] == where.partition("[")[0]


@pytest.mark.parametrize(
    ("path", "body", "cut"),
    [
        ("/rerank", {"query": QUERY, "documents": ["Bees dance in the hive at dawn.", "Bees."]}, "1"),
        ("/v2/rerank", {"query": QUERY, "documents": ["Bees dance in the hive at dawn.", "Bees."]}, "1"),
        ("/score", {"text_1": QUERY, "text_2": ["Bees dance in the hive at dawn.", "Bees."]}, "1"),
        (
            "/score",
            {"text_1": [QUERY, "Bees?"], "text_2": ["Bees.", "Bees."], "max_tokens_per_query": 2},
            "1",
        ),
        ("/rerank", {"query": QUERY, "documents": ["Bees.", "Tides."], "max_tokens_per_query": 2}, "2"),
    ],
)
def test_max_tokens_per_doc_and_query_cuts_are_counted_as_the_engines_cuts_are(
    cross_encoder_server: Served, http: httpx.Client, path: str, body: dict[str, object], cut: str
) -> None:
    """vLLM's max_tokens_per_doc / _query cut texts before the engine; a cut text counts in
    X-Truncated-Inputs as truncate_prompt_tokens' cut does (each pair once; a lone query cut cuts
    every pair)."""
    answer = http.post(f"{cross_encoder_server.url}{path}", json={"max_tokens_per_doc": 3, **body})
    assert answer.status_code == 200, answer.text
    assert answer.headers[TRUNCATED_INPUTS_HEADER] == cut


# -- refusing: per request, and the whole server ---------------------------------------------------------
def test_a_request_refuses_with_todays_error(minilm_server: Served, batch: list[str]) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(minilm_server).embeddings.create(
            model=minilm_server.model, input=batch[:8], extra_body={"truncate": False}
        )
    assert caught.value.code == "context_length_exceeded"
    assert "more than the model's maximum of 256" in caught.value.message
    with pytest.raises(cohere.BadRequestError) as refused:
        _cohere(minilm_server).embed(
            texts=batch[:8], model=minilm_server.model, input_type="search_document", truncate="NONE"
        )
    error = refused.value.body["error"]
    assert error["param"] == "truncate" and "send truncate END" in error["message"]
    assert "truncate_prompt_tokens" not in error["message"]
    with pytest.raises(RemoteInvalidInputError, match="more than the model's maximum"):
        PoolragClient(minilm_server.url).embed_array(batch[:8], PoolingParams(truncate=False))


def test_serve_no_auto_truncate_refuses_unless_a_request_truncates(
    refusing_server: Served, batch: list[str], expected: np.ndarray, http: httpx.Client
) -> None:
    client, texts = _openai(refusing_server), batch[:8]
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="minilm", input=texts)
    assert caught.value.code == "context_length_exceeded"
    for asked in ({"truncate": True}, {"truncate_prompt_tokens": -1}):
        response = client.embeddings.create(
            model="minilm", input=texts, encoding_format="float", extra_body=asked
        )
        got = np.array([item.embedding for item in response.data], dtype=np.float32)
        np.testing.assert_allclose(got, expected[:8], rtol=0, atol=1e-6)
    with pytest.raises(cohere.BadRequestError) as refused:
        _cohere(refusing_server).embed(texts=texts, model="minilm", input_type="search_document")
    assert refused.value.body["error"]["param"] == "truncate"
    kept = _cohere(refusing_server).embed(
        texts=texts, model="minilm", input_type="search_document", truncate="END"
    )
    np.testing.assert_allclose(np.array(kept.embeddings.float_), expected[:8], rtol=0, atol=1e-6)
    scored = http.post(f"{refusing_server.url}/score", json={"text_1": QUERY, "text_2": texts})
    assert scored.status_code == 400 and scored.json()["error"]["code"] == "context_length_exceeded"
