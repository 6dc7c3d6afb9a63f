"""POST /score and /v1/score: pair scores equal ``engine.score`` (1:1, 1:N, N:N)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from .conftest import Served

QUERY = "What is the capital of France?"
DOCUMENTS = ["Paris is the capital of France.", "Bananas are yellow.", "France borders Spain."]


def _scores(server: Served, text_1: str | list[str], text_2: str | list[str]) -> list[float]:
    return [out.outputs.score for out in server.engine.score(text_1, text_2)]


@pytest.mark.parametrize("path", ["/score", "/v1/score"])
@pytest.mark.parametrize(
    ("text_1", "text_2"),
    [(QUERY, DOCUMENTS[0]), (QUERY, DOCUMENTS), (["a cat", "a dog", "a car"], DOCUMENTS)],
    ids=["1:1", "1:N", "N:N"],
)
def test_embedding_model_scores_equal_offline(
    minilm_server: Served, http: httpx.Client, path: str, text_1: str | list[str], text_2: str | list[str]
) -> None:
    body = http.post(f"{minilm_server.url}{path}", json={"text_1": text_1, "text_2": text_2}).json()
    expected = _scores(minilm_server, text_1, text_2)
    assert [d["index"] for d in body["data"]] == list(range(len(expected)))
    assert all(d["object"] == "score" for d in body["data"])
    np.testing.assert_allclose([d["score"] for d in body["data"]], expected, rtol=0, atol=1e-6)
    assert body["object"] == "list" and body["model"] == minilm_server.model


@pytest.mark.parametrize("path", ["/score", "/v1/score"])
def test_cross_encoder_scores_equal_offline(
    cross_encoder_server: Served, http: httpx.Client, path: str
) -> None:
    body = http.post(f"{cross_encoder_server.url}{path}", json={"text_1": QUERY, "text_2": DOCUMENTS}).json()
    np.testing.assert_allclose(
        [d["score"] for d in body["data"]], _scores(cross_encoder_server, QUERY, DOCUMENTS), rtol=0, atol=1e-6
    )
    tokens = sum(out.num_tokens for out in cross_encoder_server.engine.score(QUERY, DOCUMENTS))
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


def test_cross_encoder_truncation_keeps_text_of_both_sides_or_is_refused(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """A pair truncated to ``N`` tokens is ``N`` tokens; a limit below the pair's special tokens
    plus one token of each text would leave nothing to score, and is refused naming the field."""
    body = {"text_1": QUERY, "text_2": DOCUMENTS[0], "truncate_prompt_tokens": 8}
    answer = http.post(f"{cross_encoder_server.url}/score", json=body).json()
    assert answer["usage"]["prompt_tokens"] == 8
    refused = http.post(f"{cross_encoder_server.url}/score", json={**body, "truncate_prompt_tokens": 4})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (
        error["param"] == "truncate_prompt_tokens"
        and "adds 3 special tokens to each pair" in error["message"]
    )


def _part(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}]}


def test_vllm_s_content_items_are_one_query_or_document_each(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """Current vLLM reads a side as ``ScoreInput | list[ScoreInput]``: each ``{"content": [part]}``
    is one query or document, alone or in a list beside strings. A list of them was a 400 ("text_2:
    must be a string or a list of strings")."""
    url = f"{cross_encoder_server.url}/score"
    expected = _scores(cross_encoder_server, QUERY, DOCUMENTS)
    for text_1, text_2 in [
        (QUERY, [_part(DOCUMENTS[0]), DOCUMENTS[1], _part(DOCUMENTS[2])]),
        (_part(QUERY), DOCUMENTS),
        ([_part(QUERY)], [_part(d) for d in DOCUMENTS]),
    ]:
        answer = http.post(url, json={"text_1": text_1, "text_2": text_2})
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose([d["score"] for d in answer.json()["data"]], expected, rtol=0, atol=1e-6)
    one = http.post(url, json={"queries": QUERY, "documents": _part(DOCUMENTS[1])})
    assert one.status_code == 200, one.text
    np.testing.assert_allclose([d["score"] for d in one.json()["data"]], expected[1:2], rtol=0, atol=1e-6)


def test_a_content_of_several_parts_is_refused_not_read_as_several_documents(
    cross_encoder_server: Served, http: httpx.Client
) -> None:
    """vLLM fuses a ``{"content": [...]}`` of several parts into one input; it was answered here
    with one score per part, as many scores as parts for what vLLM scores as one document."""
    fused = {"content": [{"type": "text", "text": DOCUMENTS[0]}, {"type": "text", "text": DOCUMENTS[1]}]}
    for text_2, where in [(fused, "text_2"), ([DOCUMENTS[2], fused], "text_2[1]")]:
        answer = http.post(f"{cross_encoder_server.url}/score", json={"text_1": QUERY, "text_2": text_2})
        assert answer.status_code == 400, answer.text
        message = answer.json()["error"]["message"]
        assert message.startswith(f"{where}.content has 2 parts, which vLLM fuses into one input"), message
