"""Bounded load test on loopback: 32 concurrent clients for 10 s against the CLI-started server.

Every response is checked against the offline engine's answer for exactly what that request sent
(random subsets of a corpus in random order), so a mixed-up batch or a crossed response fails.
Throughput and latency are logged, never asserted.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import statistics
import time
from dataclasses import dataclass, field

import httpx
import numpy as np
import pytest

from .conftest import Served

logger = logging.getLogger(__name__)

CLIENTS = 32
DURATION_S = 10.0
QUERY = "How do bounded queues keep servers responsive?"
CORPUS = [
    f"Note {i}: " + sentence
    for i, sentence in enumerate(
        [
            "A bounded queue refuses work it cannot finish in time.",
            "Backpressure tells clients to slow down.",
            "Retry-After says when to try again.",
            "Embeddings map text to vectors.",
            "Cross-encoders read the query and document together.",
            "Token budgets decide the size of each batch.",
            "Latency percentiles describe the slow tail.",
            "Loopback traffic never leaves the machine.",
        ]
        * 4
    )
]


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    inputs: int = 0
    errors: list[str] = field(default_factory=list)


def _vector(item: dict, encoding: str) -> np.ndarray:
    if encoding == "base64":
        return np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
    return np.asarray(item["embedding"], dtype=np.float32)


async def _client(seed: int, url: str, model: str, stop_at: float, expected: dict, tally: Tally) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        while time.monotonic() < stop_at:
            kind = rng.choice(["embeddings", "embeddings", "score", "rerank", "tokenize"])
            texts = rng.sample(CORPUS, rng.randint(1, 8))
            encoding = rng.choice(["float", "base64"])
            started = time.perf_counter()
            try:
                if kind == "embeddings":
                    body = {"model": model, "input": texts, "encoding_format": encoding}
                    response = await http.post("/v1/embeddings", json=body)
                elif kind == "score":
                    response = await http.post("/v1/score", json={"text_1": QUERY, "text_2": texts})
                elif kind == "rerank":
                    response = await http.post("/v1/rerank", json={"query": QUERY, "documents": texts})
                else:
                    response = await http.post("/tokenize", json={"prompt": texts[0]})
                elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    tally.errors.append(f"{kind}: HTTP {response.status_code} {response.text[:200]}")
                    continue
                _verify(kind, texts, encoding, response.json(), expected)
            except (httpx.HTTPError, AssertionError, KeyError, ValueError) as exc:
                tally.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                continue
            tally.latencies.setdefault(kind, []).append(elapsed)
            tally.inputs += 1 if kind == "tokenize" else len(texts)


def _verify(kind: str, texts: list[str], encoding: str, body: dict, expected: dict) -> None:
    if kind == "embeddings":
        assert [d["index"] for d in body["data"]] == list(range(len(texts)))
        for text, item in zip(texts, body["data"], strict=True):
            np.testing.assert_allclose(_vector(item, encoding), expected["vectors"][text], rtol=0, atol=1e-5)
        assert body["usage"]["prompt_tokens"] == sum(len(expected["tokens"][t]) for t in texts)
    elif kind == "score":
        got = [d["score"] for d in body["data"]]
        np.testing.assert_allclose(got, [expected["scores"][t] for t in texts], rtol=0, atol=1e-5)
    elif kind == "rerank":
        results = body["results"]
        assert sorted(r["index"] for r in results) == list(range(len(texts)))
        scores = [r["relevance_score"] for r in results]
        assert scores == sorted(scores, reverse=True)
        for r in results:
            assert r["document"]["text"] == texts[r["index"]]
            assert abs(r["relevance_score"] - expected["scores"][texts[r["index"]]]) <= 1e-5
    else:
        assert body["tokens"] == expected["tokens"][texts[0]]


@pytest.mark.slow
def test_32_clients_for_10_seconds_get_only_correct_answers(minilm_server: Served) -> None:
    engine = minilm_server.engine
    expected = {
        "vectors": {t: out.outputs.embedding for t, out in zip(CORPUS, engine.embed(CORPUS), strict=True)},
        "scores": {t: out.outputs.score for t, out in zip(CORPUS, engine.score(QUERY, CORPUS), strict=True)},
        "tokens": {t: engine.tokenize(t) for t in CORPUS},
    }
    tally = Tally()

    async def run() -> float:
        started = time.monotonic()
        stop_at = started + DURATION_S
        clients = [
            _client(seed, minilm_server.url, minilm_server.model, stop_at, expected, tally)
            for seed in range(CLIENTS)
        ]
        await asyncio.wait_for(asyncio.gather(*clients), timeout=DURATION_S + 180)
        return time.monotonic() - started

    wall = asyncio.run(run())
    all_latencies = sorted(x for values in tally.latencies.values() for x in values)
    requests = len(all_latencies)

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000

    lines = [
        f"load: {CLIENTS} clients, {wall:.1f}s wall, {requests} ok requests, {len(tally.errors)} errors, "
        f"{requests / wall:.1f} req/s, {tally.inputs / wall:.1f} inputs/s, latency ms p50 "
        f"{pct(all_latencies, 0.5):.0f} p95 {pct(all_latencies, 0.95):.0f} "
        f"p99 {pct(all_latencies, 0.99):.0f} max {all_latencies[-1] * 1000:.0f}"
        if requests
        else "load: no successful requests"
    ]
    for kind, values in sorted(tally.latencies.items()):
        values.sort()
        lines.append(
            f"load: {kind}: {len(values)} requests, mean {statistics.fmean(values) * 1000:.0f} ms, "
            f"p50 {pct(values, 0.5):.0f} ms, p95 {pct(values, 0.95):.0f} ms"
        )
    for line in lines:
        logger.warning(line)

    assert tally.errors == []
    assert requests >= CLIENTS  # every client got answers
    assert set(tally.latencies) == {"embeddings", "score", "rerank", "tokenize"}
