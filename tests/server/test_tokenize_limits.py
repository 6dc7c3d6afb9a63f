"""Issue 47 item 1: ``/tokenize`` under the per-request token cap every other route enforces.

One 15.7 MB prompt peaked the server at 2.9 GB and answered 3,145,730 ids (the cap is 524,288):
a long prompt is now counted window by window, the count stops at the cap, and a prompt over it
is a 413 naming ``prompt``; a prompt within it is answered whole, the same ids as the engine's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from poolrag import Engine

from .conftest import cli_server, serve_in_thread
from .test_memory import PeakRSS, _rss_mb

#: Most the server may grow refusing one 15.7 MB prompt: the body and its parsed text many times
#: over, but not the 3.1 million token records (2.4 GB before).
MAX_GROWTH_MB = 400
SHORT_CAP = 1_000  # tokens: short prompts (one counting window) are measured after tokenising
LONG_CAP = 20_000  # tokens: a prompt of 20k words (100 kB) is counted in windows first


@pytest.fixture(scope="module")
def capped(minilm_engine: Engine) -> Iterator[dict[int, str]]:
    with (
        serve_in_thread(minilm_engine, max_request_tokens=SHORT_CAP) as short,
        serve_in_thread(minilm_engine, max_request_tokens=LONG_CAP) as long,
    ):
        yield {SHORT_CAP: short, LONG_CAP: long}


def _tokenize(url: str, prompt: str, **fields: object) -> httpx.Response:
    return httpx.post(f"{url}/tokenize", json={"prompt": prompt, **fields}, timeout=120)


@pytest.mark.parametrize("cap", [SHORT_CAP, LONG_CAP])
def test_a_prompt_at_the_cap_is_answered_whole(
    capped: dict[int, str], minilm_engine: Engine, cap: int
) -> None:
    prompt = "word " * (cap - 2)  # one token a word, and [CLS] ... [SEP]
    response = _tokenize(capped[cap], prompt)
    assert response.status_code == 200, response.text
    assert response.json()["tokens"] == minilm_engine.tokenize(prompt)
    assert response.json()["count"] == cap
    bare = _tokenize(capped[cap], "word " * cap, add_special_tokens=False)  # no special tokens counted
    assert bare.status_code == 200 and bare.json()["count"] == cap


@pytest.mark.parametrize("cap", [SHORT_CAP, LONG_CAP])
@pytest.mark.parametrize("words_over", [1, 50_000])
def test_a_prompt_over_the_cap_is_413_naming_prompt(
    capped: dict[int, str], cap: int, words_over: int
) -> None:
    response = _tokenize(capped[cap], "word " * (cap - 2 + words_over))
    assert response.status_code == 413, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "request_too_large" and error["param"] == "prompt"
    assert f"more than {cap} tokens" in error["message"]
    bare = _tokenize(capped[cap], "word " * (cap + words_over), add_special_tokens=False)
    assert bare.status_code == 413, bare.text[:300]


@pytest.fixture(scope="module")
def own_server(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    log = tmp_path_factory.mktemp("tokenize-server") / "server.log"
    with cli_server(log, str(minilm_path), "--log-level", "warning") as (url, process):
        yield url, process.pid


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
def test_a_16_mb_prompt_is_refused_with_bounded_memory(own_server: tuple[str, int]) -> None:
    """The default limits (2,048 inputs x 256 tokens = 524,288 tokens) on a served MiniLM."""
    url, pid = own_server
    with httpx.Client(timeout=600) as http:
        assert http.post(f"{url}/tokenize", json={"prompt": "warm up"}).status_code == 200
        before = _rss_mb(pid)
        with PeakRSS(pid) as peak:
            response = http.post(f"{url}/tokenize", json={"prompt": "word " * 3_145_728})
    assert response.status_code == 413, response.text[:300]
    assert "more than 524288 tokens" in response.json()["error"]["message"]
    assert peak.peak - before < MAX_GROWTH_MB, f"{before:.0f} MB -> {peak.peak:.0f} MB"
