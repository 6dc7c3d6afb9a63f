"""Java's ``java.net.http.HttpClient`` (what LangChain4j and Spring AI send through) against
``poolrag serve``, with its defaults: HTTP/2 preferred, so every request on plain http offers the
cleartext upgrade (``Connection: Upgrade, HTTP2-Settings``, ``Upgrade: h2c``). The server answers in
HTTP/1.1 with the body read whole; httptools once skipped such a request's body, and every POST
from a default Java client was a 400 'not valid JSON' (src/poolrag/server/protocol.py)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from .conftest import Served
from .foreign_clients import program, run_client

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday.", "Le café ferme à midi."]
QUERY = "What is the capital of France?"
DOCUMENTS = ["Bananas are rich in potassium.", "Paris is the capital of France.", "France borders Spain."]


@pytest.fixture(scope="module")
def answers(minilm_server: Served, cross_encoder_server: Served) -> list[dict[str, Any]]:
    """PostJson.java's answers to three requests in order on one client: embeddings, an unknown
    model, a rerank on another server."""
    java = program("java", "openjdk-17-jdk-headless")
    requests = [
        (f"{minilm_server.url}/v1/embeddings", {"model": minilm_server.model, "input": TEXTS}),
        (f"{minilm_server.url}/v1/embeddings", {"model": "gpt-4", "input": TEXTS[0]}),
        (f"{cross_encoder_server.url}/v1/rerank", {"query": QUERY, "documents": DOCUMENTS}),
    ]
    lines = "".join(f"{url} {json.dumps(body, ensure_ascii=False)}\n" for url, body in requests)
    return run_client([java, "PostJson.java"], lines)


def _json(answer: dict[str, Any]) -> Any:
    """The answer's body, which came as JSON over HTTP/1.1 (the upgrade offer declined)."""
    assert answer["version"] == "HTTP_1_1"
    assert answer["content_type"].startswith("application/json"), answer
    return json.loads(answer["body"])


def test_embeddings_equal_the_engines(answers: list[dict[str, Any]], minilm_server: Served) -> None:
    assert answers[0]["status"] == 200, answers[0]["body"]
    body = _json(answers[0])
    assert [row["index"] for row in body["data"]] == [0, 1, 2]
    expected = minilm_server.engine.embed_array(TEXTS)  # the third text's accents came as UTF-8
    np.testing.assert_allclose([row["embedding"] for row in body["data"]], expected, rtol=0, atol=1e-6)
    tokens = sum(out.num_tokens for out in minilm_server.engine.embed(TEXTS))
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    assert body["model"] == minilm_server.model


def test_an_unknown_model_is_openais_404(answers: list[dict[str, Any]], minilm_server: Served) -> None:
    assert answers[1]["status"] == 404, answers[1]["body"]
    error = _json(answers[1])["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"model 'gpt-4' is not served here; use '{minilm_server.model}'")


def test_rerank_equals_the_engines(answers: list[dict[str, Any]], cross_encoder_server: Served) -> None:
    assert answers[2]["status"] == 200, answers[2]["body"]
    results = _json(answers[2])["results"]
    scores = [out.outputs.score for out in cross_encoder_server.engine.score(QUERY, DOCUMENTS)]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    assert [r["index"] for r in results] == order
    np.testing.assert_allclose([r["relevance_score"] for r in results], [scores[i] for i in order], atol=1e-6)
    assert [r["document"]["text"] for r in results] == [DOCUMENTS[i] for i in order]
