"""SageMaker's ``POST /invocations`` takes TEI's bodies and vLLM's: each body gets the answer of the
route its fields name, as that route gives it (TEI's bodies: ``test_tei_api``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolrag import Engine
from poolrag.server import ServerSettings
from poolrag.server.app import create_models_app
from poolrag.testing.live_server import LiveServer

QUERY = "What is the capital of France?"
PASSAGES = ["Paris is the capital of France.", "Pandas eat bamboo."]


@pytest.fixture(scope="module")
def url(
    minilm_engine: Engine, cross_encoder_engine: Engine, tiny_model: Callable[..., Path]
) -> Iterator[str]:
    """A token classifier first (a kind TEI does not serve), then an embedder and a cross-encoder."""
    tagger = Engine(tiny_model("bert", head="token", num_labels=3))
    app = create_models_app(
        [
            (tagger, ServerSettings(served_model_names=("tagger",))),
            (minilm_engine, ServerSettings(served_model_names=("embedder",))),
            (cross_encoder_engine, ServerSettings(served_model_names=("reranker",))),
        ]
    )
    with LiveServer(app) as live:
        yield live.url


def _answer(url: str, path: str, body: Any) -> dict[str, Any]:
    answer = httpx.post(f"{url}{path}", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return {key: value for key, value in answer.json().items() if key not in ("id", "created")}


@pytest.mark.parametrize(
    ("body", "route"),
    [
        ({"input": PASSAGES}, "/v1/embeddings"),  # naming no model: the first that embeds
        ({"input": PASSAGES, "model": "embedder", "encoding_format": "base64"}, "/v1/embeddings"),
        ({"input": PASSAGES, "model": "reranker"}, "/classify"),  # a model that does not embed
        ({"input": PASSAGES, "model": "tagger"}, "/pooling"),  # nor classifies
        ({"input": PASSAGES, "model": "embedder", "task": "token_embed"}, "/pooling"),
        ({"query": QUERY, "documents": PASSAGES}, "/rerank"),
        ({"query": QUERY, "documents": PASSAGES, "model": "embedder"}, "/rerank"),
        ({"text_1": QUERY, "text_2": PASSAGES}, "/score"),
        ({"queries": [QUERY], "documents": PASSAGES[:1]}, "/score"),
        ({"data_1": QUERY, "data_2": PASSAGES, "model": "embedder"}, "/score"),
    ],
)
def test_a_vllm_body_gets_the_answer_of_the_route_its_fields_name(url: str, body: Any, route: str) -> None:
    assert _answer(url, "/invocations", body) == _answer(url, route, body)


def test_a_body_no_route_takes_names_the_bodies_each_route_takes(url: str) -> None:
    for body in ({"inputz": "hello"}, ["hello"], "hello"):
        refused = httpx.post(f"{url}/invocations", json=body, timeout=60)
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert "no route takes this body" in message and "query and documents (rerank)" in message


def test_a_wrong_field_is_refused_as_its_route_refuses_it(url: str) -> None:
    """Not 'no route' (vLLM's answer when a body validates as none of its requests)."""
    body = {"input": "hello", "model": "embedder", "dimensions": 0}
    refused = httpx.post(f"{url}/invocations", json=body, timeout=60)
    own = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60)
    assert refused.status_code == own.status_code == 400
    assert refused.json()["error"] == own.json()["error"] and own.json()["error"]["param"] == "dimensions"
    unknown = httpx.post(f"{url}/invocations", json={"input": "hello", "model": "gone"}, timeout=60)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    for model in (["embedder"], {"a": 1}, 3):  # read before any field is checked: was a 500
        wrong = httpx.post(f"{url}/invocations", json={"input": "hello", "model": model}, timeout=60)
        assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "model", wrong.text


def test_a_tei_body_is_answered_in_teis_shape_by_the_first_models_kind(url: str) -> None:
    """The first model tags tokens, which TEI does not serve: TEI's 424, as at POST /."""
    for path in ("/", "/invocations"):
        refused = httpx.post(f"{url}{path}", json={"inputs": "John lives in Paris."}, timeout=60)
        assert refused.status_code == 424 and refused.json()["error_type"] == "Backend"
        assert "token_classify" in refused.json()["error"]


def test_a_tei_body_naming_a_served_model_gets_the_route_of_that_models_kind(url: str) -> None:
    """TEI's / dispatches on its one model's kind; with several served, on the kind of the model the
    body names: both answered as the first model's (a token classifier here), TEI's 424."""
    cases = [
        ({"model": "embedder", "inputs": PASSAGES}, "/embed"),
        ({"model": "embedder", "inputs": {"source_sentence": QUERY, "sentences": PASSAGES}}, "/similarity"),
        ({"model": "reranker", "query": QUERY, "texts": PASSAGES}, "/rerank"),
        ({"model": "reranker", "inputs": PASSAGES[0], "parameters": {}}, "/predict"),
    ]
    for body, route in cases:
        own = httpx.post(f"{url}{route}", json=body, timeout=120)
        assert own.status_code == 200, own.text
        for path in ("/", "/invocations"):
            answer = httpx.post(f"{url}{path}", json=body, timeout=120)
            assert answer.status_code == 200, (path, body, answer.text)
            assert answer.json() == own.json(), (path, body)
    # the reranker refuses an embedding's body at /, as TEI's reranker does; a name not served is a 404
    for path in ("/", "/invocations"):
        refused = httpx.post(f"{url}{path}", json={"model": "reranker", "inputs": PASSAGES}, timeout=60)
        assert refused.status_code == 422 and "gives no embeddings" in refused.json()["error"]
        unknown = httpx.post(f"{url}{path}", json={"model": "gone", "inputs": "hello"}, timeout=60)
        assert unknown.status_code == 404 and "'embedder'" in unknown.json()["error"], unknown.text
        named_tagger = httpx.post(f"{url}{path}", json={"model": "tagger", "inputs": "hello"}, timeout=60)
        assert named_tagger.status_code == 424 and "token_classify" in named_tagger.json()["error"]
