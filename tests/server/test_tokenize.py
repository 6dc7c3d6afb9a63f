"""POST /tokenize: the ids the model reads, for clients that budget context length."""

from __future__ import annotations

import httpx

from .conftest import Served


def test_tokens_equal_the_engines(minilm_server: Served, http: httpx.Client) -> None:
    text = "Tokenise this sentence, please."
    body = http.post(f"{minilm_server.url}/tokenize", json={"prompt": text}).json()
    tokens = minilm_server.engine.tokenize(text)
    # vLLM writes token_strs as null when not asked for; clients index it
    assert body == {"count": len(tokens), "max_model_len": 256, "tokens": tokens, "token_strs": None}


def test_without_special_tokens_and_with_token_strings(minilm_server: Served, http: httpx.Client) -> None:
    body = http.post(
        f"{minilm_server.url}/tokenize",
        json={"prompt": "hello world", "add_special_tokens": False, "return_token_strs": True},
    ).json()
    assert body["token_strs"] == ["hello", "world"]
    assert body["tokens"] == minilm_server.engine.tokenize("hello world")[1:-1]
