"""GET /v1/models: the served names, as the openai client lists them."""

from __future__ import annotations

import httpx
import openai
import pytest

from poolrag.client.wire import MODEL_IDENTITY_HEADER, OUTPUT_FINGERPRINT_HEADER
from poolrag.model_facts import ModelFacts

from .conftest import MINILM_NAMES, Served


def test_openai_client_lists_every_served_name(minilm_server: Served) -> None:
    client = openai.OpenAI(base_url=f"{minilm_server.url}/v1", api_key="unused", max_retries=0)
    assert [model.id for model in client.models.list()] == list(MINILM_NAMES)


def test_openai_client_retrieves_one_model_by_any_of_its_names(
    minilm_server: Served, http: httpx.Client
) -> None:
    client = openai.OpenAI(base_url=f"{minilm_server.url}/v1", api_key="unused", max_retries=0)
    listed = {card["id"]: card for card in http.get(f"{minilm_server.url}/v1/models").json()["data"]}
    for name in MINILM_NAMES:
        retrieved = http.get(f"{minilm_server.url}/v1/models/{name}").json()
        assert retrieved == listed[name] and client.models.retrieve(name).id == name
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-4")
    assert missing.value.body["code"] == "model_not_found"


def test_model_cards_describe_the_model(minilm_server: Served, http: httpx.Client) -> None:
    body = http.get(f"{minilm_server.url}/v1/models").json()
    card = body["data"][0]
    assert body["object"] == "list"
    assert card["object"] == "model" and card["owned_by"] == "poolrag"
    assert card["root"] == MINILM_NAMES[0]  # the served name, never the model folder's path
    assert "/" not in str(body)
    assert card["max_model_len"] == 256
    assert card["tasks"] == ["embed", "score", "token_embed"]


def test_model_cards_carry_the_engines_facts_under_the_served_name(
    minilm_server: Served, http: httpx.Client
) -> None:
    cards = http.get(f"{minilm_server.url}/v1/models").json()["data"]
    expected = minilm_server.engine.facts.renamed(MINILM_NAMES[0])
    for card in cards:  # one engine: every served name describes it the same way
        assert ModelFacts.from_json(MINILM_NAMES[0], card) == expected
    assert cards[0]["model_identity"].startswith(f"{MINILM_NAMES[0]}@")
    assert cards[0]["score_kind"] == "cosine" and cards[0]["embedding_dim"] == 384


def test_every_answer_names_the_served_weights(minilm_server: Served, http: httpx.Client) -> None:
    """The client compares these headers with the facts it keeps, on every response."""
    card = http.get(f"{minilm_server.url}/v1/models").json()["data"][0]
    requests = [
        ("GET", "/v1/models", None),
        ("POST", "/v1/embeddings", {"input": ["a text"]}),
        ("POST", "/score", {"text_1": "query", "text_2": ["a text"]}),
        ("POST", "/pooling", {"input": ["a text"], "task": "token_embed"}),
        ("POST", "/rerank", {"query": "query", "documents": ["a text"]}),
        ("POST", "/v1/embeddings", {"input": [""]}),  # refused: still this model's answer
    ]
    for method, path, body in requests:
        response = http.request(method, f"{minilm_server.url}{path}", json=body)
        assert response.headers[MODEL_IDENTITY_HEADER] == card["model_identity"], path
        assert response.headers[OUTPUT_FINGERPRINT_HEADER] == card["output_fingerprint"], path
    assert response.status_code == 400


def test_the_identity_goes_to_authorised_callers_only(keyed_server: Served, http: httpx.Client) -> None:
    refused = http.get(f"{keyed_server.url}/v1/models")
    assert refused.status_code == 401 and MODEL_IDENTITY_HEADER not in refused.headers


def test_an_empty_model_name_is_not_found(minilm_server: Served, http: httpx.Client) -> None:
    """GET /v1/models/ answered the first model's card, as if it were the model named; OpenAI and
    vLLM answer a model id they do not serve with 404, and so does every other unknown name here."""
    for path in ("/v1/models/", "/v1/models/gpt-4"):
        answer = http.get(f"{minilm_server.url}{path}")
        assert answer.status_code == 404, (path, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "model_not_found" and error["param"] == "model"
        assert error["message"].endswith("is not served here; use 'all-MiniLM-L6-v2', 'minilm'")
