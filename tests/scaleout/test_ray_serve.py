"""A Ray Serve deployment of two replicas, each holding an embedder and a reranker, on a local 2-CPU
cluster answers like ``poolrag serve A B``.

Ray reports both replicas running; concurrent requests through its proxy get the offline engine's
vectors, the reranker scores as the offline cross-encoder does, and the endpoints answer (and
refuse) as the single-process server does. One deployment serves every test: each start on a busy
2-core machine costs the better part of a minute.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from ray import serve

from poolrag.engine import Engine
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.scaleout.ray_serve import APP_NAME, ReplicaPlan, running_proxy_address, serve_models_on_ray
from poolrag.server.settings import ServerSettings

TEXTS = [f"request {n}: {' '.join(['honeybees dance'] * (1 + n % 5))}" for n in range(24)]
PASSAGES = ["Paris is the capital of France.", "Pandas eat bamboo.", "The Eiffel Tower is in Paris."]
QUERY = "What is the capital of France?"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    plan = ReplicaPlan(replicas=2, cpus_per_replica=1.0)
    serve_models_on_ray(models, plan, host="127.0.0.1", port=port, blocking=False)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()


def test_two_replicas_are_running(served: str) -> None:
    status = serve.status().applications[APP_NAME]
    replicas = status.deployments[APP_NAME].replica_states
    assert status.status == "RUNNING" and replicas.get("RUNNING") == 2


def test_concurrent_requests_get_the_offline_engines_vectors(served: str, minilm_engine: Engine) -> None:
    async def ask(client: httpx.AsyncClient, text: str) -> list[float]:
        response = await client.post("/v1/embeddings", json={"model": "embedder", "input": text})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["model"] == "embedder"
        return body["data"][0]["embedding"]

    async def all_at_once() -> list[list[float]]:
        async with httpx.AsyncClient(base_url=served, timeout=120) as client:
            return await asyncio.gather(*(ask(client, t) for t in TEXTS))

    got = np.array(asyncio.run(all_at_once()), dtype=np.float32)
    want = minilm_engine.embed_array(TEXTS)
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_the_reranker_scores_as_the_offline_cross_encoder(served: str, cross_encoder_path: Path) -> None:
    with httpx.Client(base_url=served, timeout=120) as client:
        scored = client.post("/score", json={"model": "reranker", "text_1": QUERY, "text_2": PASSAGES})
    assert scored.status_code == 200, scored.text
    want = Engine(cross_encoder_path).score_array(QUERY, PASSAGES)
    np.testing.assert_allclose([row["score"] for row in scored.json()["data"]], want, atol=1e-5)


def test_the_same_http_api(served: str) -> None:
    with httpx.Client(base_url=served, timeout=60) as client:
        assert client.get("/health").status_code == 200
        models = client.get("/v1/models").json()
        assert [card["id"] for card in models["data"]] == ["embedder", "reranker"]
        bad = client.post("/v1/embeddings", json={"model": "embedder", "input": []})
        assert bad.status_code == 400 and "error" in bad.json()
        unknown = client.post("/score", json={"model": "other", "text_1": QUERY, "text_2": PASSAGES})
        assert unknown.status_code == 404 and "'embedder', 'reranker'" in unknown.json()["error"]["message"]


def test_joining_a_running_serve_elsewhere_is_refused_naming_its_proxy(
    served: str, minilm_path: Path
) -> None:
    """Ray keeps a running Serve's first HTTP options: the command said nothing and its app
    answered on the old port, while the port asked for refused connections."""
    port = int(served.rsplit(":", 1)[1])
    assert running_proxy_address() == ("127.0.0.1", port)
    models = [(EngineArgs(str(minilm_path)), ServerSettings(served_model_names=("embedder",)))]
    with pytest.raises(InvalidInputError, match=f"proxy on 127.0.0.1:{port}.*--port {port}"):
        serve_models_on_ray(models, ReplicaPlan(replicas=1), host="127.0.0.1", port=free_port())


def test_a_blocking_deployment_stopped_by_ctrl_c_removes_its_application(
    served: str, minilm_path: Path, cross_encoder_path: Path
) -> None:
    """On a cluster the command joined, the app went on answering after Ctrl-C stopped the command
    (Ray's own ``serve run`` removes it). Runs last: it takes the module's deployment down."""
    import os
    import signal
    import threading

    port = int(served.rsplit(":", 1)[1])
    models = [
        (EngineArgs(str(minilm_path)), ServerSettings(served_model_names=("embedder",))),
        (EngineArgs(str(cross_encoder_path)), ServerSettings(served_model_names=("reranker",))),
    ]
    plan = ReplicaPlan(replicas=2, cpus_per_replica=1.0)

    def ctrl_c_once_running() -> None:
        threading.Event().wait(10)  # past serve.start: the same app again deploys nothing new
        for _ in range(600):
            app = serve.status().applications.get(APP_NAME)
            if app is not None and app.status == "RUNNING":
                break
            threading.Event().wait(0.5)
        # a real SIGINT, as Ctrl-C sends: it wakes a wait the main thread is blocked in, where
        # _thread.interrupt_main only sets a flag that such a wait may never look at
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        serve_models_on_ray(models, plan, host="127.0.0.1", port=port, blocking=True)
    assert APP_NAME not in serve.status().applications


def test_the_proxy_holds_at_most_one_replicas_queue(minilm_path: Path, cross_encoder_path: Path) -> None:
    """Ray's default lets requests (and their bodies, buffered in the proxy) wait without bound;
    here as many may wait as one replica admits, and the next gets Ray's 503."""
    from poolrag.scaleout.ray_serve import replica_deployment

    models = [
        (EngineArgs(str(minilm_path)), ServerSettings(served_model_names=("a",), max_queue=3)),
        (EngineArgs(str(cross_encoder_path)), ServerSettings(served_model_names=("b",), max_queue=5)),
    ]
    deployment = replica_deployment(models, ReplicaPlan(replicas=2), {"CPU": 2.0})
    assert deployment.max_ongoing_requests == deployment.max_queued_requests == 8


def test_a_replica_whose_engine_stopped_fails_rays_health_check(minilm_path: Path) -> None:
    """Ray calls ``check_health`` on each replica and replaces one that raises; ``/health`` alone
    answered 503 from it while Ray kept routing requests to it."""
    from types import SimpleNamespace

    from poolrag.scaleout.ray_serve import PoolragReplica

    engine = Engine(minilm_path, tune="off")
    replica = SimpleNamespace(engines=[(engine, ServerSettings(served_model_names=("embedder",)))])
    PoolragReplica.check_health(replica)  # a running engine: healthy
    engine.close()
    with pytest.raises(RuntimeError, match="the engine of 'embedder' stopped"):
        PoolragReplica.check_health(replica)


def test_requests_still_running_when_the_drain_ends_are_answered_503(served: str, minilm_path: Path) -> None:
    """Ray kills a removed application's replicas at its graceful-shutdown deadline: a request still
    running got a text/plain 500. The replica closes its engines when the drain window ends, and
    the request gets the JSON 503 of ``poolrag serve``. Runs after the Ctrl-C test, on its port."""
    import threading
    import time

    port = int(served.rsplit(":", 1)[1])
    settings = ServerSettings(served_model_names=("embedder",), drain_timeout_s=2.0)
    serve_models_on_ray(
        [(EngineArgs(str(minilm_path)), settings)], ReplicaPlan(replicas=1), port=port, blocking=False
    )
    body = {"input": [f"{i} " + "honeybees dance in the sun " * 40 for i in range(2000)]}  # minutes
    answers: list[httpx.Response] = []
    running = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{served}/v1/embeddings", json=body, timeout=600))
    )
    running.start()
    deadline = time.monotonic() + 120
    while 'poolrag_queue_depth{model="embedder"} 1.0' not in httpx.get(f"{served}/metrics", timeout=30).text:
        assert running.is_alive() and time.monotonic() < deadline, "the request never reached the replica"
        time.sleep(0.2)  # not yet admitted: removing the app now would answer it Ray's 404
    removed = time.monotonic()
    serve.delete(APP_NAME)
    running.join(600)
    assert answers and answers[0].status_code == 503, answers[0].text[:500] if answers else "no answer"
    assert answers[0].json()["error"]["code"] == "engine_closed"
    assert time.monotonic() - removed < 60  # the 2 s window, not the request's minutes
