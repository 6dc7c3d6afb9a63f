"""A 16 MB request that keeps only the model's maximum is served with bounded memory (issue 27).

The server runs as ``poolrag serve`` in a process of its own, so its resident memory is read from
``/proc/<pid>/status`` while it answers. Tokenising the whole 15.7 MB text (3.1 million words)
took the server from 0.4 GB to 2.8 GB; only the cut the model keeps is tokenised now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine, PoolingParams

from .conftest import cli_server

#: Most the server may grow answering one 15.7 MB request: the body, its parsed text and their
#: copies fit many times over; the 3.1 million tokens' records (2.4 GB before) do not.
MAX_GROWTH_MB = 700


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class PeakRSS(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, _rss_mb(self.pid))
            time.sleep(0.01)

    def __enter__(self) -> PeakRSS:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


@pytest.fixture(scope="module")
def own_server(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    log = tmp_path_factory.mktemp("memory-server") / "server.log"
    with cli_server(log, str(minilm_path), "--log-level", "warning") as (url, process):
        yield url, process.pid


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(
    ("path", "body", "answer"),
    [
        ("/v1/embeddings", {"input": "word " * 3_145_728}, lambda b: b["data"][0]["embedding"]),
        ("/score", {"text_1": "a word", "text_2": "word " * 3_145_728}, lambda b: b["data"][0]["score"]),
    ],
    ids=["embeddings", "score"],
)
def test_a_16_mb_truncated_request_is_served_with_bounded_memory(
    own_server: tuple[str, int], minilm_engine: Engine, path: str, body: dict, answer
) -> None:
    url, pid = own_server
    with httpx.Client(timeout=600) as http:
        assert http.post(f"{url}/v1/embeddings", json={"input": "warm up"}).status_code == 200
        before = _rss_mb(pid)
        with PeakRSS(pid) as peak:
            response = http.post(f"{url}{path}", json={**body, "truncate_prompt_tokens": -1})
    assert response.status_code == 200, response.text
    assert peak.peak - before < MAX_GROWTH_MB, f"{before:.0f} MB -> {peak.peak:.0f} MB"
    expected_text = "word " * 300  # more than the 256 tokens kept
    truncated = PoolingParams(truncate_prompt_tokens=-1)
    if path == "/score":
        expected = minilm_engine.score("a word", expected_text, truncated)[0].outputs.score
    else:
        expected = minilm_engine.embed(expected_text, truncated)[0].outputs.embedding
    np.testing.assert_allclose(answer(response.json()), expected, atol=1e-5)
