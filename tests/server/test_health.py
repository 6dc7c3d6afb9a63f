"""GET /health: liveness for load balancers; HEAD answers the same status, as TEI's does, and so do
TEI's other probes, ``/ping`` (SageMaker's) and ``GET /``."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Served


def test_health_is_ok(minilm_server: Served, http: httpx.Client) -> None:
    response = http.get(f"{minilm_server.url}/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_head_health_is_ok_without_a_body(minilm_server: Served, http: httpx.Client) -> None:
    response = http.head(f"{minilm_server.url}/health")
    assert response.status_code == 200
    assert response.content == b""


@pytest.mark.parametrize("path", ["/ping", "/"])
def test_teis_other_probes_answer_as_health(minilm_server: Served, http: httpx.Client, path: str) -> None:
    assert http.get(f"{minilm_server.url}{path}").json() == {"status": "ok"}
    assert http.head(f"{minilm_server.url}{path}").status_code == 200
    spec = http.get(f"{minilm_server.url}/openapi.json").json()
    assert "/ping" not in spec["paths"] and "get" not in spec["paths"].get("/", {})  # TEI publishes /health
