"""API key: every data endpoint needs ``Authorization: Bearer <key>`` when the server has one."""

from __future__ import annotations

import httpx
import numpy as np
import openai
import pytest

from .conftest import API_KEY, Served


def _assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "authentication_error"
    assert "API key" in error["message"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": API_KEY},
        {"Authorization": f"Basic {API_KEY}"},
    ],
    ids=["none", "wrong-key", "no-scheme", "basic-scheme"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/embeddings"),
        ("POST", "/rerank"),
        ("POST", "/score"),
        ("POST", "/invocations"),
        ("POST", "/"),
        ("GET", "/v1/models"),
        ("GET", "/metrics"),
    ],
)
def test_requests_without_the_key_get_401(
    keyed_server: Served, http: httpx.Client, headers: dict, method: str, path: str
) -> None:
    body = {"input": "x", "query": "q", "documents": ["d"], "text_1": "a", "text_2": "b"}
    _assert_401(http.request(method, f"{keyed_server.url}{path}", json=body, headers=headers))


def test_the_key_unlocks_the_endpoints(keyed_server: Served, http: httpx.Client) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    assert (
        http.post(f"{keyed_server.url}/v1/embeddings", json={"input": "x"}, headers=headers).status_code
        == 200
    )
    assert http.get(f"{keyed_server.url}/metrics", headers=headers).status_code == 200


@pytest.mark.parametrize("path", ["/health", "/ping", "/openapi.json", "/"])
def test_health_and_api_description_stay_public(keyed_server: Served, http: httpx.Client, path: str) -> None:
    """``GET /`` too: TEI's probe, which TEI leaves open with ``--api-key`` (its ``POST`` needs the key)."""
    assert http.get(f"{keyed_server.url}{path}").status_code == 200


def test_the_key_is_checked_before_the_body_is_read(keyed_server: Served, http: httpx.Client) -> None:
    response = http.post(
        f"{keyed_server.url}/v1/embeddings", content=b"x" * 1000, headers={"content-type": "application/json"}
    )
    _assert_401(response)


def test_openai_client_with_and_without_the_key(keyed_server: Served) -> None:
    good = openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key=API_KEY, max_retries=0)
    vector = good.embeddings.create(model=keyed_server.model, input="hello").data[0].embedding
    np.testing.assert_allclose(vector, keyed_server.engine.embed("hello")[0].outputs.embedding, atol=1e-6)
    bad = openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.embeddings.create(model=keyed_server.model, input="hello")


@pytest.mark.parametrize(
    "values",
    [
        ["Basic x", f"Bearer {API_KEY}"],
        [f"Bearer {API_KEY}", "Basic x"],
        ["Bearer wrong", f"Bearer {API_KEY}"],
        [f"Bearer {API_KEY}", f"Bearer {API_KEY}"],
    ],
    ids=["basic-then-key", "key-then-basic", "wrong-then-key", "key-twice"],
)
@pytest.mark.parametrize("path", ["/v1/embeddings", "/health"])
def test_two_authorization_headers_are_refused_before_the_key_is_judged(
    keyed_server: Served, http: httpx.Client, values: list[str], path: str
) -> None:
    headers = [("Authorization", value) for value in values]
    response = http.post(f"{keyed_server.url}{path}", json={"input": "x"}, headers=headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "duplicate_authorization" and error["param"] == "Authorization"
    assert "2 Authorization headers" in error["message"] and "\n" not in error["message"]
