#!/usr/bin/env python3
"""Every default nox session, in two lanes at once: ``python scripts/nox_lanes.py [NOX ARGS]``.

Most sessions keep one core busy (a pip install, a serial pytest), so on a 2-core machine a bare
``nox``, one session after another, leaves the other core idle for most of the run; two lanes fill it.
The first lane runs ``tests``, then two of ``first_hour``'s runs (whose documented commands find the
test models ``tests`` built); the second every other default session in the noxfile's order, which
puts the last ``first_hour`` run at its end, long after ``tests`` built those models, and ``ray``
just before it: a local Ray cluster slowed fourfold beside ``tests`` (its checkpoint test 75 s alone,
298 s in CI), so it runs once ``tests`` is ending. Measured in CI, that split ends the lanes within
about a minute of each other.
Each line of output is prefixed with its lane and the minutes and seconds since the start; the exit
status is non-zero when a session failed in either. A failed lane's reasons (pytest's FAILED and
ERROR lines, nox's failure lines, then its last lines) are printed again at the very end: CI keeps
only the tail of the output, and the lane that ends first would otherwise scroll out of it.
Arguments go to both nox calls (``-- -x`` passes ``-x`` to every pytest run).
A bare ``nox`` still runs them all, one at a time.
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: tests builds the test assets that first_hour's documented commands resolve hub ids to
FIRST_LANE = ("tests", "first_hour(readme)", "first_hour(server)")
#: the lines that say why a session failed: pytest's short summary, nox's verdicts
REASON = re.compile(r"^(FAILED |ERROR |nox > (Session|Command) .* failed)")
RECAP_REASONS = 60
RECAP_TAIL = 40


def default_sessions() -> list[str]:
    """What a bare ``nox`` runs, in its order, a parametrised session as each of its runs by the name
    ``nox -s`` takes (``first_hour(readme)``)."""
    import nox
    from nox import registry

    runpy.run_path(str(ROOT / "noxfile.py"))
    found = registry.get()
    runs = []
    for name in nox.options.sessions or []:
        params = getattr(found[name], "parametrize", None)
        runs += [f"{name}({param.id})" for param in params] if params else [name]
    return runs


def split(sessions: list[str]) -> tuple[list[str], list[str]]:
    """The sessions in two lanes: :data:`FIRST_LANE`, then every other one in its order."""
    missing = [name for name in FIRST_LANE if name not in sessions]
    if missing:
        raise SystemExit(f"noxfile.py's default sessions lack {', '.join(missing)}")
    return list(FIRST_LANE), [name for name in sessions if name not in FIRST_LANE]


class Lane:
    """One nox call: its output relayed with a prefix, and what a failure recap needs kept."""

    def __init__(self, number: int, names: list[str], process: subprocess.Popen[str]) -> None:
        self.number, self.names, self.process = number, names, process
        self.reasons: list[str] = []
        self.tail: deque[str] = deque(maxlen=RECAP_TAIL)

    def relay(self, lock: threading.Lock, started: float) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            minutes, seconds = divmod(int(time.monotonic() - started), 60)
            prefixed = f"[lane {self.number} {minutes:02d}:{seconds:02d}] {line}"
            self.tail.append(prefixed)
            if REASON.match(line) and len(self.reasons) < RECAP_REASONS:
                self.reasons.append(prefixed)
            with lock:
                sys.stdout.write(prefixed)
                sys.stdout.flush()

    def recap(self) -> str:
        """Why this lane failed, for the end of the output."""
        heading = f"== lane {self.number} failed: why, then its last {len(self.tail)} lines =="
        return "".join([heading + "\n", *self.reasons, "...\n", *self.tail])


def main(argv: list[str]) -> int:
    lock = threading.Lock()
    started = time.monotonic()
    lanes, relays = [], []
    for number, names in enumerate(split(default_sessions()), start=1):
        command = [sys.executable, "-m", "nox", "-s", *names, *argv]
        print(f"[lane {number}] {' '.join(command[1:])}", flush=True)
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        lane = Lane(number, names, process)
        relays.append(threading.Thread(target=lane.relay, args=(lock, started), daemon=True))
        relays[-1].start()
        lanes.append(lane)
    try:
        for lane, relay in zip(lanes, relays, strict=True):
            lane.process.wait()
            relay.join()
    finally:
        for lane in lanes:
            if lane.process.poll() is None:
                lane.process.terminate()
    minutes = (time.monotonic() - started) / 60
    failed = [lane for lane in lanes if lane.process.returncode != 0]
    for lane in failed:
        sys.stdout.write(lane.recap())
    for lane in lanes:
        code = lane.process.returncode
        verdict = "passed" if code == 0 else f"FAILED (exit {code})"
        print(f"lane {lane.number} ({', '.join(lane.names)}): {verdict}")
    print(f"both lanes ended in {minutes:.1f} minutes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
