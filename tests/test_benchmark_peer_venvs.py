"""benchmarks/vs_vllm.py and vs_onnx.py run their peer in a venv of its own: when that interpreter is
missing they say so at once, not with a FileNotFoundError after poolrag's side has been measured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SRC = Path(__file__).resolve().parents[1] / "src"


PEERS = [("vs_vllm.py", "--vllm-python"), ("vs_onnx.py", "--onnx-python")]


@pytest.mark.parametrize(("script", "flag"), PEERS)
def test_a_missing_peer_interpreter_is_a_usage_error(tmp_path: Path, script: str, flag: str) -> None:
    missing = tmp_path / "venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, script, "--n", "2", "--passes", "1", flag, str(missing)],
        cwd=BENCHMARKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{flag} {missing} not found" in done.stderr
    assert "Traceback" not in done.stderr
