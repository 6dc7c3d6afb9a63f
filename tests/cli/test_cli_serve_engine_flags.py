"""``poolrag serve`` takes the engine options ``Engine`` takes: a real server started with them
says in its log that they were applied, and answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_passes_model_impl_and_cpu_fast_mode_to_the_engine(minilm_path: Path, tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "poolrag.cli", "serve", str(minilm_path), "--port", str(port)]
    argv += ["--model-impl", "transformers", "--cpu-fast-mode", "bf16", "--log-level", "info"]
    with log.open("w") as sink:
        server = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while True:
                assert server.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the server did not come up"
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.3)
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/embeddings", json={"input": ["a cat"]}, timeout=60
            )
            assert answer.status_code == 200 and len(answer.json()["data"][0]["embedding"]) == 384
        finally:
            server.terminate()
            server.wait(timeout=30)
    text = log.read_text()
    assert "transformers implementation" in text
    assert "cpu_fast_mode=bf16" in text
