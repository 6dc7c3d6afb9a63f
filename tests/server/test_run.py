"""How ``poolrag serve`` stops: requests in flight run on for ``--timeout-graceful-shutdown``, and
those still running at its end are answered 503 "shutting down" in JSON (uvicorn cancelled them:
a bare text/plain 500 and a traceback each in the log)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from poolrag.server.run import uvicorn_config
from poolrag.server.settings import HttpOptions, ServerSettings

from .conftest import _free_port, _wait_healthy, cli_server, wait_for_body_bytes

LONG = " ".join(["a sentence about the weather in the mountains"] * 60)


def test_requests_still_running_when_the_drain_window_ends_get_a_json_503(
    minilm_path: Path, tmp_path: Path
) -> None:
    answers: list[httpx.Response] = []
    log = tmp_path / "server.log"
    with cli_server(log, str(minilm_path), "--timeout-graceful-shutdown", "2") as (url, process):

        def embed(route: str, body: dict[str, object]) -> None:
            answers.append(httpx.post(f"{url}{route}", json=body, timeout=120))

        bodies = [
            ("/v1/embeddings", {"input": [f"{i} {LONG}" for i in range(2048)]}),  # ~20 s of CPU or more
            ("/embed", {"inputs": [f"{i} {LONG}" for i in range(512)]}),  # TEI's route, within the budget
        ]
        clients = [threading.Thread(target=embed, args=body) for body in bodies]
        for client in clients:
            client.start()
        wait_for_body_bytes(
            url, sum(len(httpx.Request("POST", url, json=body).content) for _, body in bodies)
        )
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        for client in clients:
            client.join(60)
        assert process.wait(30) in (0, -signal.SIGTERM)
        assert time.monotonic() - started < 15  # the window, not the requests' own minutes
    text = log.read_text()
    by_route = {answer.request.url.path: answer for answer in answers}
    openai, tei = by_route["/v1/embeddings"], by_route["/embed"]
    assert openai.status_code == 503 and openai.json()["error"]["code"] == "engine_closed", text
    assert tei.status_code == 503 and tei.json()["error_type"] == "Unhealthy", tei.text
    assert "Traceback" not in text and "still running are answered 503" in text, text


def _requests_in_flight(
    url: str, requests: int, texts: int
) -> tuple[list[threading.Thread], list[httpx.Response | Exception]]:
    """``requests`` embedding calls of ``texts`` long texts each, sent at once from threads of their
    own; their answers (or the errors of those that got none) land in the list as they come. Returns
    once the server has read every body not yet answered (a loaded machine accepts 60 connections
    slowly, and one still queued when the signal comes is reset: no answer at all)."""
    answers: list[httpx.Response | Exception] = []
    bodies = [{"input": [f"{i} {j} {LONG}" for j in range(texts)]} for i in range(requests)]
    sizes = [len(httpx.Request("POST", url, json=body).content) for body in bodies]
    answered: list[int] = []

    def embed(i: int) -> None:
        try:
            answers.append(httpx.post(f"{url}/v1/embeddings", json=bodies[i], timeout=120))
        except httpx.HTTPError as exc:
            answers.append(exc)
        answered.append(sizes[i])

    clients = [threading.Thread(target=embed, args=(i,)) for i in range(requests)]
    for client in clients:
        client.start()
    # answered before the look: an answered request's bytes are given back as it is answered
    wait_for_body_bytes(url, lambda: sum(sizes) - sum(answered))
    return clients, answers


def _signal_twice(
    process: subprocess.Popen,
    clients: list[threading.Thread],
    first: signal.Signals,
    second: signal.Signals,
    *,
    after: float,
    between: float,
) -> float:
    """``first`` once the requests run, ``second`` while the server stops; returns when the second
    was sent, once every client has its answer."""
    time.sleep(after)
    process.send_signal(first)
    time.sleep(between)
    stopping = time.monotonic()
    process.send_signal(second)
    for client in clients:
        client.join(120)
    return stopping


def test_a_request_uvicorn_cancels_at_the_end_of_its_window_gets_the_json_503_too(
    minilm_path: Path, tmp_path: Path
) -> None:
    """A request that never reaches the engine before uvicorn's own deadline (here a body still
    arriving; on a loaded machine, thousands of texts still tokenising) is cancelled by uvicorn,
    which answered it a bare text/plain 500 and logged a traceback; it gets the JSON 503 the closed
    engines give the rest."""
    log = tmp_path / "server.log"
    with cli_server(log, str(minilm_path), "--timeout-graceful-shutdown", "1") as (url, process):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            head = "POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            client.sendall(f"{head}Content-Length: 100000\r\n\r\n".encode() + b'{"input": ["')
            wait_for_body_bytes(url, len(b'{"input": ["'))
            process.send_signal(signal.SIGTERM)
            client.setblocking(False)
            answer = b""
            deadline = time.monotonic() + 40
            while b"\r\n\r\n" not in answer and time.monotonic() < deadline:
                with contextlib.suppress(BlockingIOError, BrokenPipeError, ConnectionResetError):
                    client.send(b"a" * 10)  # the body keeps arriving, too slowly to end in the window
                with contextlib.suppress(BlockingIOError):
                    answer += client.recv(65536) or b"\r\n\r\n"
                time.sleep(0.2)
            client.setblocking(True)
            with contextlib.suppress(OSError):
                while chunk := client.recv(65536):
                    answer += chunk
        process.wait(60)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), (answer[:500], log.read_text()[-3000:])
    assert json.loads(body)["error"]["code"] == "engine_closed", body
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_answers_every_request_left_at_once(
    second: signal.Signals, minilm_path: Path, tmp_path: Path
) -> None:
    """SIGTERM, then Ctrl-C (or another SIGTERM) with many requests in flight: the engines close at
    once and every request gets an HTTP answer, its vectors or a JSON 503 (the close once waited
    behind the requests' own tokenising, was cancelled before it ran, and the rest were dropped
    without an answer when the process exited)."""
    log = tmp_path / "server.log"
    with cli_server(log, str(minilm_path), "--timeout-graceful-shutdown", "60") as (url, process):
        clients, answers = _requests_in_flight(url, requests=60, texts=8)
        stopping = _signal_twice(process, clients, signal.SIGTERM, second, after=2.0, between=1.0)
        process.wait(60)
        assert time.monotonic() - stopping < 40  # not the 60 s drain
    dropped = [a for a in answers if isinstance(a, Exception)]
    assert len(answers) == 60 and not dropped, (dropped[:3], log.read_text()[-2000:])
    # the close, running on its own thread, finishes though its wait was cut short
    assert "Exception in thread" not in log.read_text(), log.read_text()[-3000:]
    codes = {a.status_code for a in answers if isinstance(a, httpx.Response)}
    assert codes <= {200, 503} and 503 in codes, codes
    assert all(a.json()["error"]["code"] == "engine_closed" for a in answers if a.status_code == 503)


def test_ctrl_c_ends_the_server_with_status_0_as_uvicorns_command_does(
    minilm_path: Path, tmp_path: Path
) -> None:
    with cli_server(tmp_path / "server.log", str(minilm_path)) as (url, process):
        assert httpx.get(f"{url}/health").status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, (tmp_path / "server.log").read_text()[-2000:]


def test_ctrl_c_twice_with_requests_in_flight_stops_without_a_traceback(
    minilm_path: Path, tmp_path: Path
) -> None:
    """Ctrl-C, then Ctrl-C again while requests run (a user's "now"): every request is answered,
    the command ends 0, and the log holds no traceback (uvicorn skipped the app's shutdown on the
    second signal and logged the cancelled lifespan as an ERROR with two chained tracebacks)."""
    log = tmp_path / "server.log"
    with cli_server(log, str(minilm_path), "--timeout-graceful-shutdown", "60") as (url, process):
        clients, answers = _requests_in_flight(url, requests=16, texts=16)
        _signal_twice(process, clients, signal.SIGINT, signal.SIGINT, after=1.0, between=0.5)
        assert process.wait(60) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert len(answers) == 16 and not [a for a in answers if isinstance(a, Exception)], text[-2000:]
    assert "still running are answered 503" in text, text[-2000:]  # the second Ctrl-C came mid-flight
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]


def test_a_server_on_every_ipv6_address_answers_ipv4_clients_too(minilm_path: Path, tmp_path: Path) -> None:
    """``--host ::`` was IPv6 only (asyncio sets IPV6_V6ONLY): an IPv4 client, or a Kubernetes
    probe of the pod's IPv4 address, was refused, where vLLM and ``--workers`` listen on both."""
    port, log = _free_port(), tmp_path / "server.log"
    command = [
        sys.executable,
        "-m",
        "poolrag.cli",
        "serve",
        str(minilm_path),
        "--host",
        "::",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        )
    try:
        _wait_healthy(f"http://[::1]:{port}", process, log)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        assert f"listening on http://[::]:{port}" in log.read_text()  # uvicorn's line is not written
    finally:
        process.terminate()
        process.wait(timeout=30)


SETTINGS = ServerSettings(served_model_names=("m",))


def _access_line(path: str) -> logging.LogRecord:
    """uvicorn's access record of a GET to ``path`` (its args: client, method, path, version, status)."""
    args = ("127.0.0.1:5000", "GET", path, "1.1", 200)
    line = '%s - "%s %s HTTP/%s" %d'
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 0, line, args, None)


def test_a_second_server_in_one_process_quiets_its_own_paths_not_the_first_ones() -> None:
    """``--disable-access-log-for-endpoints`` filters uvicorn's one access logger; a later server in
    the same process (a notebook restarting one) replaces the earlier server's quiet paths."""
    access = logging.getLogger("uvicorn.access")
    kept = list(access.filters)
    try:
        uvicorn_config(FastAPI(), SETTINGS, HttpOptions(quiet_paths=frozenset({"/metrics"})))
        assert not access.filter(_access_line("/metrics")) and access.filter(_access_line("/health"))
        uvicorn_config(FastAPI(), SETTINGS, HttpOptions(quiet_paths=frozenset({"/health"})))
        assert access.filter(_access_line("/metrics")) and not access.filter(_access_line("/health"))
        uvicorn_config(FastAPI(), SETTINGS, HttpOptions())
        assert access.filter(_access_line("/metrics")) and access.filter(_access_line("/health"))
    finally:
        access.filters[:] = kept
