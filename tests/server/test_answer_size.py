"""``--max-answer-values``: per-token data is a row per token, so an answer is bounded on its own
(a 768 KB body of token ids answered 1 GB of JSON), and refused with a 413 naming the option."""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from poolrag import Engine

from .conftest import Served, serve_in_thread

WIDTH = 384  # MiniLM's hidden size: one token's row
LIMIT = 10 * WIDTH  # ten tokens' rows
TEN_TOKENS = [[101, 2023, 2003, 1037, 2460, 3793, 2055, 1996, 4937, 102]]


@pytest.fixture(scope="module")
def ten_token_server(minilm_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(minilm_engine, served_model_names=("minilm",), max_answer_values=LIMIT) as url:
        yield Served(url, "minilm", minilm_engine)


@pytest.mark.parametrize(
    ("path", "field", "extra"),
    [("/pooling", "input", {"task": "token_embed"}), ("/embed_all", "inputs", {})],
)
def test_a_per_token_answer_up_to_the_limit_is_served_and_past_it_refused_naming_the_option(
    ten_token_server: Served, http: httpx.Client, path: str, field: str, extra: dict[str, str]
) -> None:
    url = f"{ten_token_server.url}{path}"
    assert http.post(url, json={field: TEN_TOKENS, **extra}).status_code == 200  # exactly the limit
    refused = http.post(url, json={field: TEN_TOKENS * 2, **extra})
    assert refused.status_code == 413
    message = refused.json()["error"]
    message = message if isinstance(message, str) else message["message"]  # TEI's shape, vLLM's
    assert f"would hold {2 * LIMIT} values" in message
    assert f"limit of {LIMIT} per answer (--max-answer-values)" in message


def test_texts_are_counted_by_the_tokens_the_model_read(ten_token_server: Served, http: httpx.Client) -> None:
    """A text's rows are known once it is tokenised: 3 words and [CLS] [SEP] are five rows."""
    url = f"{ten_token_server.url}/pooling"
    served = http.post(url, json={"input": ["one two three"] * 2, "task": "token_embed"})
    assert served.status_code == 200 and len(served.json()["data"][0]["data"]) == 5
    refused = http.post(url, json={"input": ["one two three"] * 3, "task": "token_embed"})
    assert refused.status_code == 413 and f"would hold {15 * WIDTH} values" in refused.text


def test_a_refused_answers_rows_are_not_kept_once_it_is_answered(
    ten_token_server: Served, http: httpx.Client
) -> None:
    """The engine core's threads kept the last batch's job, and so every row of its request, until
    the next request came: a refused 2048-text /embed_all held 2 GB in an idle server. 128 texts of
    256 tokens are 50 MB of rows. The server's thread lets go of them after the answer is sent, so
    on a loaded machine the client may look first: it looks again for a few seconds, far less than
    the idle time for which the rows stayed held."""
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        refused = http.post(f"{ten_token_server.url}/embed_all", json={"inputs": ["word " * 600] * 128})
        assert refused.status_code == 413 and f"would hold {128 * 256 * WIDTH} values" in refused.text
        deadline = time.monotonic() + 10
        while True:
            gc.collect()
            held_mb = (tracemalloc.get_traced_memory()[0] - before) / 1e6
            if held_mb < 10 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        tracemalloc.stop()
    assert held_mb < 10


def test_an_answer_of_one_row_per_input_is_counted_the_same(
    ten_token_server: Served, http: httpx.Client
) -> None:
    inputs = ["a text"] * 11  # eleven pooled vectors: past ten rows
    refused = http.post(f"{ten_token_server.url}/pooling", json={"input": inputs, "task": "embed"})
    assert refused.status_code == 413
    assert http.post(
        f"{ten_token_server.url}/pooling", json={"input": inputs[:10], "task": "embed"}
    ).is_success


def test_the_client_sends_a_call_over_the_limit_in_halves_and_names_an_input_too_large_alone(
    ten_token_server: Served, minilm_engine: Engine
) -> None:
    """A call whose answer is over the server's limit is split until each request's answer fits, so
    a ColBERT-style caller gets every input's rows, in order, as the engine gives them; one input
    over the limit alone is refused naming its place in the caller's list and the option."""
    from poolrag.client import PoolragClient, RemoteInvalidInputError

    texts = ["one two three", "four five", "six", "seven eight nine"]  # 5, 4, 3, 5 rows
    want = minilm_engine.encode_arrays(texts, "token_embed")
    with PoolragClient(ten_token_server.url) as client:
        got = client.encode_arrays(texts, "token_embed")
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            assert (g == w).all()
        async_got = asyncio.run(client.aencode_arrays(texts, "token_embed"))
        assert all((g == w).all() for g, w in zip(async_got, want, strict=True))
        long = "one two three four five six seven eight nine ten"
        with pytest.raises(RemoteInvalidInputError, match=r"input\[1\].*--max-answer-values") as refused:
            client.encode_arrays(["six", long], "token_embed")
        assert refused.value.status_code == 413 and "--max-body-bytes" not in str(refused.value)
