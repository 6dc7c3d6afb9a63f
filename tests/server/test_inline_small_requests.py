"""Small bodies and answers stay on the event loop; large ones still go through a worker thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from poolrag import Engine
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


def test_a_large_body_and_answer_still_go_to_a_worker_thread(url: str, hops: list[str]) -> None:
    texts = [f"passage {i}: " + "retrieval augmented generation " * 12 for i in range(16)]
    body = {"input": texts}
    assert len(httpx.Request("POST", url, json=body).content) > routing.INLINE_BODY_BYTES
    assert routing.INLINE_ANSWER_VALUES < 16 * 384
    answer = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60)
    assert answer.status_code == 200 and len(answer.json()["data"]) == 16
    assert hops == ["parse_body", "_dump"]


def test_a_small_bad_body_is_refused_as_before(url: str, hops: list[str]) -> None:
    answer = httpx.post(f"{url}/v1/embeddings", json={"input": "x", "dimensions": "many"}, timeout=60)
    assert answer.status_code in (400, 422)
    assert answer.json()["error"]["param"] == "dimensions"
    assert hops == []
