"""scripts/nox_lanes.py's failure recap: CI keeps only the tail of the output, so a lane that failed
early must say why again at the very end."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from nox_lanes import RECAP_TAIL, Lane  # noqa: E402

OUTPUT = [
    "nox > Running session tests",
    "tests/a.py::test_one PASSED",
    "FAILED tests/server/test_x.py::test_y - AssertionError: 1 != 2",
    "ERROR tests/ingest/test_z.py::test_w - RuntimeError: boom",
    *(f"filler {i}" for i in range(RECAP_TAIL + 10)),
    "nox > Session tests failed.",
]


def _lane(lines: list[str]) -> Lane:
    script = "import sys; sys.stdout.write(sys.stdin.read()); sys.exit(1)"
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdin is not None
    process.stdin.write("\n".join(lines) + "\n")
    process.stdin.close()
    lane = Lane(1, ["tests"], process)
    lane.relay(threading.Lock(), time.monotonic())
    process.wait()
    return lane


def test_a_failed_lane_recaps_pytest_and_nox_failures_then_its_last_lines() -> None:
    recap = _lane(OUTPUT).recap().splitlines()
    assert recap[0].startswith("== lane 1 failed")
    reasons = [line.split("] ", 1)[1] for line in recap[1 : recap.index("...")]]
    assert reasons == [OUTPUT[2], OUTPUT[3], OUTPUT[-1]]
    tail = recap[recap.index("...") + 1 :]
    assert len(tail) == RECAP_TAIL and tail[-1].endswith(OUTPUT[-1]) and "filler 0" not in "".join(tail)


def test_passing_output_has_no_reasons() -> None:
    assert _lane(["nox > Session lint was successful in 4 seconds."]).reasons == []
