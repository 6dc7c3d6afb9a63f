"""README.md's "Scaling out" block, run as written: ``poolrag ingest ... --ray`` fills the collection
the plain search then reads, and ``poolrag serve ... --ray --replicas 2`` answers with the offline
engine's vectors. Only the server's port is substituted (8000 may be taken)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
_BASH = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.M | re.S)


def readme_ray_block() -> str:
    """The README's one bash block that runs poolrag on Ray (tests/docs checks there is exactly one)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (body,) = [m["body"] for m in _BASH.finditer(text) if "--ray" in m["body"]]
    return body


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _end(process: subprocess.Popen[bytes]) -> None:
    """Ctrl-C for the block's process group (Ray Serve shuts its cluster down on it), then a kill."""
    for sig, wait in ((signal.SIGINT, 90), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def test_the_scaling_out_block_runs_as_written(no_cluster_in_process, tmp_path: Path, minilm_engine) -> None:
    body = readme_ray_block()
    assert body.count("poolrag serve ") == 1 and "--port" not in body
    port = _free_port()
    body = body.replace("poolrag serve ", f"poolrag serve --port {port} ")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_AUTH_MODE": "disabled",
        "POOLRAG_CACHE_DIR": str(tmp_path / "cache"),
    }
    log = (tmp_path / "block.log").open("wb")
    process = subprocess.Popen(
        ["bash", "-c", body], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            tail = (tmp_path / "block.log").read_text()[-4000:]
            assert process.poll() is None, f"the block exited:\n{tail}"
            assert time.monotonic() < deadline, f"no answer:\n{tail}"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        texts = ["How do I keep a sourdough starter alive?", "a kitten"]
        answer = httpx.post(f"{url}/v1/embeddings", json={"model": "minilm", "input": texts}, timeout=120)
        assert answer.status_code == 200, answer.text
        got = np.array([item["embedding"] for item in answer.json()["data"]], dtype=np.float32)
        np.testing.assert_allclose(got, minilm_engine.embed_array(texts), atol=1e-6, rtol=0)
    finally:
        _end(process)
        log.close()
    # the Ray ingest wrote the collection the single-process search reads
    search = subprocess.run(
        ["poolrag", "search", "how do I keep a sourdough starter alive?", "--collection", "demo", "-k", "3"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert search.returncode == 0, search.stderr[-3000:] + (tmp_path / "block.log").read_text()[-6000:]
    top = re.search(r"^\s*1\. -?\d+\.\d+\s+(\S+) \[", search.stdout, re.M)
    assert top is not None and Path(top[1]).name == "sourdough.md", search.stdout
