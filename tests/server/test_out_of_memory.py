"""A server short of memory fails the one request that cannot fit, clearly, and serves the next.

``poolrag serve`` runs in a process of its own, its address space capped (``RLIMIT_AS``, as a small
container or ``ulimit -v`` caps it) a little above what it uses once warm. The model is tiny but
for its feed-forward width (262,144), so one token needs about 1 MB there: one long input cannot fit
in the room left even alone, short inputs fit one at a time. Before, an allocation failure of
oneDNN ("could not create a primitive") was not seen as out of memory, and the input that did not
fit alone was answered as a server bug (500 ``internal_error``, "internal server error").
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from .conftest import cli_server

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="caps a process's address space (Linux)")

#: Address space the server may take beyond what it holds once warm: many short inputs' batches, not
#: one input of 480 tokens (about 1 GB in the wide feed-forward layer).
HEADROOM = 200 * 2**20


def _address_space(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


@pytest.fixture(scope="module")
def capped_server(tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = tiny_model("bert", intermediate_size=262_144, num_hidden_layers=2)
    log = tmp_path_factory.mktemp("oom-server") / "server.log"
    with cli_server(log, str(model), "--served-model-name", "m", "--log-level", "warning") as (url, process):
        with httpx.Client(timeout=120) as http:  # warm: the threads and buffers of a short request
            for _ in range(3):
                answer = http.post(f"{url}/v1/embeddings", json={"input": ["warm up", "a b"]})
                assert answer.status_code == 200, answer.text
        limit = _address_space(process.pid) + HEADROOM
        resource.prlimit(process.pid, resource.RLIMIT_AS, (limit, limit))
        yield url


def test_an_input_too_big_for_memory_fails_alone_and_the_server_goes_on(capped_server: str) -> None:
    client = openai.OpenAI(base_url=f"{capped_server}/v1", api_key="none", max_retries=0, timeout=120)
    with pytest.raises(openai.InternalServerError) as failed:
        client.embeddings.create(model="m", input="word " * 480)
    assert failed.value.status_code == 500
    error = failed.value.body
    assert isinstance(error, dict) and error["code"] == "out_of_memory", error
    assert "out of memory" in error["message"] and "482 tokens" in error["message"]
    # the same connection and new ones are served, and the server says it is healthy
    assert len(client.embeddings.create(model="m", input="short text").data) == 1
    with httpx.Client(timeout=120) as http:
        assert http.get(f"{capped_server}/health").status_code == 200
        texts = [f"text number {i}" for i in range(32)]  # too big as one batch: split until it fits
        answer = http.post(f"{capped_server}/v1/embeddings", json={"input": texts})
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["data"]) == 32


def test_tei_routes_answer_it_as_tei_answers_a_backend_failure(capped_server: str) -> None:
    with httpx.Client(timeout=120) as http:
        answer = http.post(f"{capped_server}/embed", json={"inputs": "word " * 480})
        assert answer.status_code == 424, answer.text
        assert answer.json()["error_type"] == "Backend"
        assert "out of memory" in answer.json()["error"]
        assert http.post(f"{capped_server}/embed", json={"inputs": "short"}).status_code == 200
