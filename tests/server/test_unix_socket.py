"""``poolrag serve --uds PATH`` (vLLM's and uvicorn's ``--uds``): the same API on a Unix domain socket,
for a proxy on the same machine.

Real servers started by the CLI, called over the socket file with httpx, the ``openai`` package and
:class:`PoolragClient`;
a stale socket file is replaced, anything else at the path is refused in one line and left as it was,
and the file goes when the server stops."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from poolrag import Engine
from poolrag.cli import main
from poolrag.client import PoolragClient
from poolrag.server.unix_socket import UnixListener

NAME = "minilm"
START_S = 180  # a ceiling for a busy machine


def _transport(path: Path) -> httpx.HTTPTransport:
    return httpx.HTTPTransport(uds=str(path))


@contextmanager
def uds_server(model: Path, path: Path, log: Path, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    """``poolrag serve MODEL --uds PATH`` in a process of its own, once ``/health`` answers there."""
    command = [sys.executable, "-m", "poolrag.cli", "serve", str(model), "--served-model-name", NAME]
    command += ["--uds", str(path), "--autotune", "off", *flags]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("POOLRAG_API_KEY", None)
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + START_S
        with httpx.Client(transport=_transport(path), base_url="http://poolrag") as client:
            while True:
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                try:
                    if client.get("/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
def test_the_api_answers_on_the_socket_file_and_the_file_goes_with_the_server(
    minilm_path: Path, minilm_engine: Engine, tmp_path: Path, workers: int
) -> None:
    path = tmp_path / "poolrag.sock"
    texts = ["a socket file instead of a port", "nginx proxy_pass http://unix:/run/poolrag.sock"]
    log = tmp_path / "server.log"
    where = "serving on unix:" if workers > 1 else "listening on unix:"  # workers: once all serve
    with uds_server(minilm_path, path, log, "--workers", str(workers)) as process:
        deadline = time.monotonic() + START_S
        while f"{where}{path}" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stat.S_ISSOCK(os.stat(path).st_mode) and stat.S_IMODE(os.stat(path).st_mode) == 0o666
        # a proxy forwards the public name: no loopback Host rule on a socket no browser can reach
        with httpx.Client(transport=_transport(path), base_url="http://search.example.com") as client:
            answer = client.post("/v1/embeddings", json={"model": NAME, "input": texts}, timeout=60)
        assert answer.status_code == 200, answer.text
        got = np.array([row["embedding"] for row in answer.json()["data"]], dtype=np.float32)
        np.testing.assert_allclose(got, minilm_engine.embed_array(texts), atol=1e-5)
        http_client = httpx.Client(transport=_transport(path))
        client = openai.OpenAI(base_url="http://localhost/v1", api_key="unused", http_client=http_client)
        created = client.embeddings.create(model=NAME, input=texts[0])
        np.testing.assert_allclose(created.data[0].embedding, got[0], atol=1e-5)
        http_client.close()
        ours = pickle.loads(pickle.dumps(PoolragClient("http://localhost", model=NAME, uds=path)))
        np.testing.assert_allclose(ours.embed_array(texts), got, atol=1e-5)
        np.testing.assert_allclose(asyncio.run(ours.aembed_array(texts)), got, atol=1e-5)
        ours.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert not path.exists()
    assert f"{where}{path}" in log.read_text()


def test_a_stale_socket_file_is_replaced_and_anything_else_is_refused_untouched(
    minilm_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server killed with ``kill -9`` leaves its socket file; binding over it failed. A file, or a
    socket another server answers on, stops the command before the model loads."""
    stale = tmp_path / "stale.sock"
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(stale))
    left.close()  # the file stays, nothing listens
    listener = UnixListener(stale)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(str(stale))  # this one listens now
        # a live server there: refused, and its file kept
        assert main(["serve", str(minilm_path), "--uds", str(stale)]) == 2
        assert (
            capsys.readouterr().err
            == f"poolrag serve: cannot listen on {stale}: another server is listening on it\n"
        )
        assert stat.S_ISSOCK(os.stat(stale).st_mode)
    finally:
        listener.close()
    assert not stale.exists()

    data = tmp_path / "notes.txt"
    data.write_text("not a socket")
    assert main(["serve", str(minilm_path), "--uds", str(data)]) == 2
    assert (
        capsys.readouterr().err == f"poolrag serve: cannot listen on {data}: it exists and is not a socket\n"
    )
    assert data.read_text() == "not a socket"
    nowhere = tmp_path / "missing" / "s.sock"
    assert main(["serve", str(minilm_path), "--uds", str(nowhere)]) == 2
    assert "its folder does not exist" in capsys.readouterr().err


def test_a_listener_leaves_a_socket_file_another_server_made_since(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    first = UnixListener(path)
    first.sock.close()  # as killed: its file is stale now
    second = UnixListener(path)  # replaces it
    first.close()
    assert stat.S_ISSOCK(os.stat(path).st_mode)  # the second server's file, not the first's to remove
    second.close()
    assert not path.exists()


def test_uds_with_ray_is_refused_in_one_line(
    minilm_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(minilm_path), "--uds", str(tmp_path / "s.sock"), "--ray", "local"]) == 2
    assert capsys.readouterr().err.startswith("poolrag serve: --uds serves from this machine")
