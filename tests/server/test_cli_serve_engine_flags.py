"""``poolrag serve`` takes the engine options ``Engine`` takes: a real server started with them
says in its log that they were applied, and answers."""

from __future__ import annotations

from pathlib import Path

import httpx

from .conftest import cli_server


def test_serve_passes_model_impl_and_cpu_fast_mode_to_the_engine(minilm_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    args = ["--model-impl", "transformers", "--cpu-fast-mode", "bf16", "--log-level", "info"]
    with cli_server(log, str(minilm_path), *args) as (url, _):
        answer = httpx.post(f"{url}/v1/embeddings", json={"input": ["a cat"]}, timeout=60)
        assert answer.status_code == 200 and len(answer.json()["data"][0]["embedding"]) == 384
    text = log.read_text()
    assert "transformers implementation" in text
    assert "cpu_fast_mode=bf16" in text


def test_a_text_embeddings_router_command_line_serves_as_tei_does(minilm_path: Path, tmp_path: Path) -> None:
    """A command line carried over from ``text-embeddings-router``: TEI's flag names
    (``--model-id``, ``--hostname``, ``--max-client-batch-size``, ``--payload-limit``,
    ``--max-concurrent-requests``, ``--max-batch-requests``) and ``--auto-truncate false`` serve the
    model with those limits, refuse an input over its length and report them in ``/info``."""
    tei = ["--model-id", str(minilm_path), "--hostname", "127.0.0.1", "--auto-truncate", "false"]
    tei += ["--max-client-batch-size", "2", "--payload-limit", "100000", "--max-concurrent-requests", "9"]
    tei += ["--max-batch-requests", "8"]
    with cli_server(tmp_path / "serve.log", *tei) as (url, _):
        info = httpx.get(f"{url}/info", timeout=30).json()
        assert info["auto_truncate"] is False and info["max_batch_requests"] == 8
        assert info["max_client_batch_size"] == 2 and info["max_concurrent_requests"] == 9
        answer = httpx.post(f"{url}/embed", json={"inputs": "hello " * 400}, timeout=60)
        assert answer.status_code == 422 and answer.json()["error_type"] == "Validation"
        answer = httpx.post(f"{url}/embed", json={"inputs": ["a", "b", "c"]}, timeout=60)
        assert answer.status_code == 422 and answer.json()["error_type"] == "Validation"
        answer = httpx.post(f"{url}/embed", json={"inputs": ["a " * 60_000]}, timeout=60)
        assert answer.status_code == 413
