"""GET /health: liveness for load balancers; HEAD answers the same status, as TEI's does."""

from __future__ import annotations

import httpx

from .conftest import Served


def test_health_is_ok(minilm_server: Served, http: httpx.Client) -> None:
    response = http.get(f"{minilm_server.url}/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_head_health_is_ok_without_a_body(minilm_server: Served, http: httpx.Client) -> None:
    response = http.head(f"{minilm_server.url}/health")
    assert response.status_code == 200
    assert response.content == b""
