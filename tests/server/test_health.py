"""GET /health: liveness for load balancers; HEAD answers the same status, as TEI's does, and so do
TEI's other probes, ``/ping`` (SageMaker's) and ``GET /``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from poolrag import Engine

from .conftest import Served, serve_in_thread


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
    if path == "/ping":  # vLLM's SageMaker route takes a POST as well
        assert http.post(f"{minilm_server.url}{path}").json() == {"status": "ok"}
    spec = http.get(f"{minilm_server.url}/openapi.json").json()
    assert "/ping" not in spec["paths"] and "get" not in spec["paths"].get("/", {})  # TEI publishes /health


def test_health_answers_503_once_a_models_engine_stopped(minilm_path: Path) -> None:
    """/health was a constant: a server whose engine had stopped took traffic it could only fail."""
    engine = Engine(minilm_path)
    with serve_in_thread(engine) as url:
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200
        engine.close()
        for probe in (httpx.get(f"{url}/health", timeout=30), httpx.get(f"{url}/ping", timeout=30)):
            assert probe.status_code == 503
            assert probe.json()["error"]["code"] == "engine_closed" and "test-model" in probe.text
        assert httpx.head(f"{url}/health", timeout=30).status_code == 503
