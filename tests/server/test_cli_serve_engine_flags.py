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
