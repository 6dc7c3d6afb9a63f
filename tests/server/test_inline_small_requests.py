"""Small bodies and answers stay on the event loop; large ones still go through a worker thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from poolrag import Engine
from poolrag.loop_work import stays_on_loop
from poolrag.server import routing

from .conftest import serve_in_thread

OFFLOADED = {"parse_body", "_dump"}


@pytest.fixture(scope="module")
def url(minilm_engine: Engine) -> Iterator[str]:
    with serve_in_thread(minilm_engine, served_model_names=("minilm",)) as live:
        yield live


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The route's functions handed to a worker thread during the test."""
    calls: list[str] = []
    real = routing.anyio.to_thread.run_sync

    async def counting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if fn.__name__ in OFFLOADED:
            calls.append(fn.__name__)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(routing.anyio.to_thread, "run_sync", counting)
    return calls


def test_a_one_text_request_makes_no_thread_hop(url: str, hops: list[str]) -> None:
    answer = httpx.post(f"{url}/v1/embeddings", json={"input": "a short query"}, timeout=60)
    assert answer.status_code == 200 and len(answer.json()["data"][0]["embedding"]) == 384
    tei = httpx.post(f"{url}/embed", json={"inputs": "a short query"}, timeout=60)
    assert tei.status_code == 200 and len(tei.json()[0]) == 384
    assert hops == []


def test_a_large_body_and_a_large_answer_each_go_to_a_worker_thread(url: str, hops: list[str]) -> None:
    """The one rule (:func:`poolrag.loop_work.stays_on_loop`) sends each large piece to a thread."""
    body = {"input": "retrieval augmented generation " * 6000}  # 186 KB of JSON, truncated to the model
    assert not stays_on_loop(body_bytes=len(httpx.Request("POST", url, json=body).content))
    answer = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60)
    assert answer.status_code == 200 and len(answer.json()["data"]) == 1
    assert hops == ["parse_body"]

    hops.clear()
    many = {"input": [f"query {i}" for i in range(64)]}  # a small body, 64 x 384 values back
    assert stays_on_loop(body_bytes=len(httpx.Request("POST", url, json=many).content))
    assert not stays_on_loop(answer_values=64 * 384)
    answer = httpx.post(f"{url}/v1/embeddings", json=many, timeout=60)
    assert answer.status_code == 200 and len(answer.json()["data"]) == 64
    assert hops == ["_dump"]


def test_a_small_bad_body_is_refused_as_before(url: str, hops: list[str]) -> None:
    answer = httpx.post(f"{url}/v1/embeddings", json={"input": "x", "dimensions": "many"}, timeout=60)
    assert answer.status_code in (400, 422)
    assert answer.json()["error"]["param"] == "dimensions"
    assert hops == []
