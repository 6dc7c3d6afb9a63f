"""GET /health: liveness for load balancers."""

from __future__ import annotations

import httpx

from .conftest import Served


def test_health_is_ok(minilm_server: Served, http: httpx.Client) -> None:
    response = http.get(f"{minilm_server.url}/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
