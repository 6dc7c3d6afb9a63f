"""The bounded queue: when it is full the server answers 503 with Retry-After at once, and
recovers as soon as the queue drains."""

from __future__ import annotations

import threading
import time

import httpx

from .conftest import Served

BUSY_TEXTS = [f"document {i} " + "about the properties of bounded queues " * 12 for i in range(96)]


def _queue_depth(http: httpx.Client, url: str) -> float:
    for line in http.get(f"{url}/metrics").text.splitlines():
        if line.startswith("poolrag_queue_depth{"):
            return float(line.split()[1])
    raise AssertionError("poolrag_queue_depth missing from /metrics")


def test_a_full_queue_answers_503_with_retry_after(one_slot_server: Served, http: httpx.Client) -> None:
    url = one_slot_server.url
    outcome: dict[str, httpx.Response] = {}
    busy = threading.Thread(
        target=lambda: outcome.setdefault(
            "busy", http.post(f"{url}/v1/embeddings", json={"input": BUSY_TEXTS})
        )
    )
    busy.start()
    deadline = time.monotonic() + 60
    while _queue_depth(http, url) < 1:  # the big request holds the only slot
        assert busy.is_alive() and time.monotonic() < deadline, "the busy request never occupied the queue"
        time.sleep(0.005)

    refused = http.post(f"{url}/v1/embeddings", json={"input": "one more"})
    busy.join(timeout=300)

    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "2"
    error = refused.json()["error"]
    assert error["code"] == "queue_full" and "at capacity (1 requests queued)" in error["message"]
    assert outcome["busy"].status_code == 200 and len(outcome["busy"].json()["data"]) == len(BUSY_TEXTS)
    # the slot is free again
    assert http.post(f"{url}/v1/embeddings", json={"input": "one more"}).status_code == 200
    assert _queue_depth(http, url) == 0
    rejections = [
        line
        for line in http.get(f"{url}/metrics").text.splitlines()
        if line.startswith("poolrag_queue_rejections_total")
    ]
    assert rejections and float(rejections[0].split()[1]) >= 1
