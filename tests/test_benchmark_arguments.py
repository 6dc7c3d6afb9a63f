"""Benchmark scripts refuse what they cannot run when parsing their arguments, not with a traceback
after minutes of measuring: a peer venv that is missing, a duration wrk cannot take."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SRC = Path(__file__).resolve().parents[1] / "src"
PEERS = [("vs_vllm.py", "--vllm-python"), ("vs_onnx.py", "--onnx-python")]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, *command], cwd=BENCHMARKS, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(("script", "flag"), PEERS)
def test_a_missing_peer_interpreter_is_a_usage_error(tmp_path: Path, script: str, flag: str) -> None:
    missing = tmp_path / "venv" / "bin" / "python"
    done = _run(script, "--n", "2", "--passes", "1", flag, str(missing))
    assert done.returncode == 2, done.stderr[-2000:]  # was 1: FileNotFoundError after ~30 s of poolrag
    assert f"{flag} {missing} not found" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_vs_servers_takes_whole_seconds_as_wrk_does() -> None:
    done = _run("serve_vs_servers.py", "--servers", "poolrag", "--models", "tiny", "--warmup", "0.5")
    assert done.returncode == 2, done.stderr[-2000:]  # was 1: wrk refused -d0.5s once a server was up
    assert "--warmup: invalid int value: '0.5'" in done.stderr
