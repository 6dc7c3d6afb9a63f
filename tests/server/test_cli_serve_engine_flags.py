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


def test_teis_auto_truncate_false_refuses_an_over_long_input(minilm_path: Path, tmp_path: Path) -> None:
    """A command line carried over from ``text-embeddings-router`` (``--auto-truncate false``, the
    value before MODEL; ``--max-batch-requests`` as ``--max-num-seqs``) serves MODEL, refuses an
    input over its length and reports both in ``/info``, as TEI does."""
    args = ("--auto-truncate", "false", str(minilm_path), "--max-num-seqs", "8")
    with cli_server(tmp_path / "serve.log", *args) as (url, _):
        info = httpx.get(f"{url}/info", timeout=30).json()
        assert info["auto_truncate"] is False and info["max_batch_requests"] == 8
        answer = httpx.post(f"{url}/embed", json={"inputs": "hello " * 400}, timeout=60)
        assert answer.status_code == 422 and answer.json()["error_type"] == "Validation"
