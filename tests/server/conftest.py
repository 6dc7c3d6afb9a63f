"""Live servers for the server tests: each listens on 127.0.0.1 on a free port and is called
with real HTTP clients.

* ``minilm_server``: ``poolrag serve`` started as a subprocess through the CLI (all-MiniLM-L6-v2).
* In-process uvicorn servers (a thread each) for the other models and server settings, sharing
  their engine with the test so results can be compared with the offline API directly.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from poolrag import Engine
from poolrag.server import ServerSettings, create_app
from poolrag.testing.live_server import LiveServer

from .model_folders import build_pylate_colbert, build_sequence_classifier

logger = logging.getLogger(__name__)

MINILM_NAMES = ("all-MiniLM-L6-v2", "minilm")
MINILM_MAX_INPUTS = 256
API_KEY = "test-key-7f3a"
STARTUP_TIMEOUT_S = 180


@dataclass(frozen=True)
class Served:
    """A running server: its base URL, the name it reports and the offline engine for the model."""

    url: str
    model: str
    engine: Engine


@contextmanager
def serve_in_thread(engine: Engine, **settings: Any) -> Iterator[str]:
    settings.setdefault("served_model_names", ("test-model",))
    with LiveServer(create_app(engine, ServerSettings(**settings))) as live:
        yield live.url


def metric_samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` of the server at ``url``: (name, sorted labels) -> value."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def wait_for_body_bytes(url: str, wanted: int | Callable[[], int], timeout_s: float = 120) -> None:
    """Returns once the server at ``url`` holds ``wanted`` request body bytes or more
    (``poolrag_inflight_body_bytes``; a callable is asked again before each look): the requests a
    test sent are accepted and read that far. A fixed sleep only hopes so, and on a loaded machine a
    connection still in the listen queue when a signal closes it is reset, not drained."""
    deadline = time.monotonic() + timeout_s
    while True:
        needed = wanted() if callable(wanted) else wanted
        held = metric_samples(url).get(("poolrag_inflight_body_bytes", ()), 0.0)
        if held >= needed:
            return
        assert time.monotonic() < deadline, f"the server holds {held:.0f} body bytes, not {needed}"
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(
    url: str, process: subprocess.Popen[bytes], log: Path, verify: ssl.SSLContext | bool = True
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"poolrag serve exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2, verify=verify).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"poolrag serve did not become healthy:\n{log.read_text()[-4000:]}")


# -- model folders --------------------------------------------------------------------------------------
def _converted_asset(name: str) -> Path | None:
    """A real converted model from the shared test assets, when they have been built."""
    try:
        from build_test_assets import ensure_assets
    except ImportError:
        return None
    try:
        folder = ensure_assets() / name
    except Exception as exc:  # the assets have tests of their own; fall back to a tiny model here
        logger.warning("test assets unavailable (%s); using a tiny random model instead of %s", exc, name)
        return None
    return folder if (folder / "config.json").is_file() else None


@pytest.fixture(scope="session")
def cross_encoder_path(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ms-marco-MiniLM-L-12-v2 when the converted asset exists, else a tiny random cross-encoder."""
    real = _converted_asset("ms-marco-MiniLM-L-12-v2")
    if real is not None:
        return real
    return build_sequence_classifier(tmp_path_factory.mktemp("cross-encoder"), minilm_path, ["LABEL_0"])


@pytest.fixture(scope="session")
def colbert_path(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    real = _converted_asset("colbert-pylate")
    if real is not None:
        return real
    return build_pylate_colbert(tmp_path_factory.mktemp("colbert"), minilm_path)


@pytest.fixture(scope="session")
def classifier_path(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sequence_classifier(
        tmp_path_factory.mktemp("classifier"),
        minilm_path,
        ["sports", "politics", "science"],
        multi_label=True,
    )


# -- servers ---------------------------------------------------------------------------------------------
@contextmanager
def cli_server(
    log: Path,
    *args: str,
    env: dict[str, str] | None = None,
    tls: ssl.SSLContext | None = None,
    new_session: bool = False,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``poolrag serve *args`` (the model first, or as ``--model``) in a process of its own on
    127.0.0.1, its output in ``log``, ``env`` added to the environment: (url, process) once
    ``/health`` answers (over HTTPS, trusting ``tls``, when it is given). ``new_session``: in a
    process group of its own, which a test may signal as a whole (``os.killpg``)."""
    port = _free_port()
    command = [sys.executable, "-m", "poolrag.cli", "serve", *args, "--port", str(port)]
    inherited = {k: v for k, v in os.environ.items() if k not in ("POOLRAG_API_KEY", "VLLM_API_KEY")}
    env = {**inherited, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=new_session
        )
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log, tls or True)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


@pytest.fixture(scope="session")
def minilm_server(
    minilm_path: Path, minilm_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """``poolrag serve`` through the CLI, in a process of its own."""
    log = tmp_path_factory.mktemp("minilm-server") / "server.log"
    args = [
        "--served-model-name",
        *MINILM_NAMES,
        "--max-inputs",
        str(MINILM_MAX_INPUTS),
        "--log-level",
        "warning",
    ]
    with cli_server(log, str(minilm_path), *args) as (url, _):
        yield Served(url, MINILM_NAMES[0], minilm_engine)


@pytest.fixture(scope="session")
def cross_encoder_engine(cross_encoder_path: Path) -> Engine:
    return Engine(cross_encoder_path)


@pytest.fixture(scope="session")
def cross_encoder_server(cross_encoder_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(cross_encoder_engine, served_model_names=("reranker",)) as url:
        yield Served(url, "reranker", cross_encoder_engine)


@pytest.fixture(scope="session")
def classifier_engine(classifier_path: Path) -> Engine:
    return Engine(classifier_path)


@pytest.fixture(scope="session")
def classifier_server(classifier_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(classifier_engine, served_model_names=("topics",)) as url:
        yield Served(url, "topics", classifier_engine)


@pytest.fixture(scope="session")
def colbert_engine(colbert_path: Path) -> Engine:
    return Engine(colbert_path)


@pytest.fixture(scope="session")
def colbert_server(colbert_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(colbert_engine, served_model_names=("colbert",)) as url:
        yield Served(url, "colbert", colbert_engine)


@pytest.fixture(scope="session")
def matryoshka_engine(minilm_path: Path) -> Engine:
    return Engine(minilm_path, hf_overrides={"matryoshka_dimensions": [128, 256, 384]})


@pytest.fixture(scope="session")
def matryoshka_server(matryoshka_engine: Engine) -> Iterator[Served]:
    with serve_in_thread(matryoshka_engine, served_model_names=("minilm-matryoshka",)) as url:
        yield Served(url, "minilm-matryoshka", matryoshka_engine)


@pytest.fixture(scope="session")
def keyed_server(minilm_engine: Engine) -> Iterator[Served]:
    """Requires ``Authorization: Bearer API_KEY``."""
    with serve_in_thread(minilm_engine, served_model_names=("minilm",), api_key=API_KEY) as url:
        yield Served(url, "minilm", minilm_engine)


@pytest.fixture(scope="session")
def one_slot_server(minilm_engine: Engine) -> Iterator[Served]:
    """Admits one request at a time, to reach the 503 of a full queue."""
    with serve_in_thread(minilm_engine, served_model_names=("minilm",), max_queue=1, retry_after_s=2) as url:
        yield Served(url, "minilm", minilm_engine)


@pytest.fixture(scope="session")
def small_body_server(minilm_engine: Engine) -> Iterator[Served]:
    """Accepts bodies of at most 4 KiB, to reach the 413 cheaply."""
    with serve_in_thread(minilm_engine, served_model_names=("minilm",), max_body_bytes=4096) as url:
        yield Served(url, "minilm", minilm_engine)


@pytest.fixture(scope="session")
def http() -> Iterator[httpx.Client]:
    """A plain HTTP client; tests pass full URLs (``f"{server.url}/v1/embeddings"``)."""
    with httpx.Client(timeout=120) as client:
        yield client
