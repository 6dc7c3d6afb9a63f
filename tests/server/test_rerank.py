"""POST /rerank, /v1/rerank, /v2/rerank (Jina / Cohere shape) for every kind of scoring model."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from .conftest import Served

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Bananas are rich in potassium.",
    "Paris is the capital and largest city of France.",
    "The Eiffel Tower is in Paris.",
    "Mount Everest is the highest mountain.",
    "France is a country in Western Europe.",
]
PATHS = ["/rerank", "/v1/rerank", "/v2/rerank"]
SERVERS = ["cross_encoder_server", "minilm_server", "colbert_server"]  # cross-encoder, cosine, MaxSim


@pytest.fixture(params=SERVERS)
def scorer(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue(request.param)


def _offline_order(server: Served) -> tuple[list[int], list[float]]:
    scores = [out.outputs.score for out in server.engine.score(QUERY, DOCUMENTS)]
    return sorted(range(len(scores)), key=lambda i: -scores[i]), scores


@pytest.mark.parametrize("path", PATHS)
def test_order_and_scores_equal_engine_score(scorer: Served, http: httpx.Client, path: str) -> None:
    body = http.post(f"{scorer.url}{path}", json={"query": QUERY, "documents": DOCUMENTS}).json()
    order, scores = _offline_order(scorer)
    assert [r["index"] for r in body["results"]] == order
    np.testing.assert_allclose(
        [r["relevance_score"] for r in body["results"]], [scores[i] for i in order], rtol=0, atol=1e-6
    )
    assert [r["document"]["text"] for r in body["results"]] == [DOCUMENTS[i] for i in order]
    tokens = sum(out.num_tokens for out in scorer.engine.score(QUERY, DOCUMENTS))
    assert body["usage"] == {"total_tokens": tokens}
    assert body["model"] == scorer.model


def test_top_n_keeps_the_best_and_documents_can_be_left_out(scorer: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{scorer.url}/v1/rerank",
        json={"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "return_documents": False},
    ).json()
    order, _ = _offline_order(scorer)
    assert [r["index"] for r in body["results"]] == order[:2]
    assert all("document" not in r for r in body["results"])


def test_document_objects_are_accepted_like_strings(cross_encoder_server: Served, http: httpx.Client) -> None:
    url = f"{cross_encoder_server.url}/rerank"
    as_strings = http.post(url, json={"query": QUERY, "documents": DOCUMENTS}).json()
    as_objects = http.post(url, json={"query": QUERY, "documents": [{"text": d} for d in DOCUMENTS]}).json()
    assert as_objects["results"] == as_strings["results"]


def test_top_n_beyond_the_documents_returns_them_all(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{minilm_server.url}/rerank", json={"query": QUERY, "documents": DOCUMENTS, "top_n": 50}
    ).json()
    assert sorted(r["index"] for r in body["results"]) == list(range(len(DOCUMENTS)))


def test_a_real_embedding_model_ranks_the_answer_first(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(f"{minilm_server.url}/v2/rerank", json={"query": QUERY, "documents": DOCUMENTS}).json()
    assert body["results"][0]["index"] == 1
    assert body["results"][-1]["index"] in (0, 3)
