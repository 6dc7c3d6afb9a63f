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


def test_detokenize_gives_back_the_text_vllm_decodes(minilm_server: Served, http: httpx.Client) -> None:
    """vLLM's ``/detokenize``: the ids of ``/tokenize`` back to text, special tokens kept."""
    tokens = http.post(f"{minilm_server.url}/tokenize", json={"prompt": "Hello, World"}).json()["tokens"]
    body = http.post(f"{minilm_server.url}/detokenize", json={"tokens": tokens}).json()
    assert body == {"prompt": "[CLS] hello, world [SEP]"}
    assert http.post(f"{minilm_server.url}/detokenize", json={"tokens": tokens[1:-1]}).json() == {
        "prompt": "hello, world"
    }


def test_detokenize_refuses_an_id_the_model_has_not(minilm_server: Served, http: httpx.Client) -> None:
    response = http.post(f"{minilm_server.url}/detokenize", json={"tokens": [101, 10**6]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "tokens" and "tokens[0] holds 1000000" in error["message"]
    assert http.post(f"{minilm_server.url}/detokenize", json={"tokens": [-1]}).status_code == 400
