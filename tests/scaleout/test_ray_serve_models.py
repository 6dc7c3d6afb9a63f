"""A Ray Serve replica holding an embedder and a reranker answers both, as ``poolrag serve A B``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from ray import serve

from poolrag.engine import Engine
from poolrag.engine_args import EngineArgs
from poolrag.scaleout.ray_serve import APP_NAME, ReplicaPlan, serve_models_on_ray
from poolrag.server.settings import ServerSettings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PASSAGES = ["Paris is the capital of France.", "Pandas eat bamboo.", "The Eiffel Tower is in Paris."]
QUERY = "What is the capital of France?"


@pytest.fixture(scope="module")
def cross_encoder_path(assets: Path) -> Path:
    return assets / "ms-marco-MiniLM-L-12-v2"


@pytest.fixture(scope="module")
def served(ray_cluster, minilm_path: Path, cross_encoder_path: Path) -> Iterator[str]:
    port = free_port()
    models = [
        (EngineArgs(str(minilm_path)), ServerSettings(served_model_names=("embedder",))),
        (EngineArgs(str(cross_encoder_path)), ServerSettings(served_model_names=("reranker",))),
    ]
    plan = ReplicaPlan(replicas=1, cpus_per_replica=1.0)
    serve_models_on_ray(models, plan, host="127.0.0.1", port=port, blocking=False)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()


def test_one_replica_serves_both_models(served: str, minilm_engine: Engine, cross_encoder_path: Path) -> None:
    status = serve.status().applications[APP_NAME]
    assert status.status == "RUNNING" and status.deployments[APP_NAME].replica_states.get("RUNNING") == 1
    with httpx.Client(base_url=served, timeout=120) as client:
        ids = [card["id"] for card in client.get("/v1/models").json()["data"]]
        embedded = client.post("/v1/embeddings", json={"model": "embedder", "input": PASSAGES})
        scored = client.post("/score", json={"model": "reranker", "text_1": QUERY, "text_2": PASSAGES})
        unknown = client.post("/score", json={"model": "other", "text_1": QUERY, "text_2": PASSAGES})
    assert ids == ["embedder", "reranker"]
    assert embedded.status_code == 200, embedded.text
    got = np.array([row["embedding"] for row in embedded.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, minilm_engine.embed_array(PASSAGES), atol=1e-6, rtol=0)
    assert scored.status_code == 200, scored.text
    want = Engine(cross_encoder_path).score_array(QUERY, PASSAGES)
    np.testing.assert_allclose([row["score"] for row in scored.json()["data"]], want, atol=1e-5)
    assert unknown.status_code == 404 and "'embedder', 'reranker'" in unknown.json()["error"]["message"]
