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
status is non-zero when a session failed in either. Arguments go to both nox calls (``-- -x`` passes
``-x`` to every pytest run). A bare ``nox`` still runs them all, one at a time.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: tests builds the test assets that first_hour's documented commands resolve hub ids to
FIRST_LANE = ("tests", "first_hour(readme)", "first_hour(server)")


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


def _relay(process: subprocess.Popen[str], label: str, lock: threading.Lock, started: float) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        with lock:
            sys.stdout.write(f"[{label} {minutes:02d}:{seconds:02d}] {line}")
            sys.stdout.flush()


def main(argv: list[str]) -> int:
    lock = threading.Lock()
    started = time.monotonic()
    runs = []
    for number, names in enumerate(split(default_sessions()), start=1):
        command = [sys.executable, "-m", "nox", "-s", *names, *argv]
        print(f"[lane {number}] {' '.join(command[1:])}", flush=True)
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        relay = threading.Thread(target=_relay, args=(process, f"lane {number}", lock, started), daemon=True)
        relay.start()
        runs.append((number, names, process, relay))
    try:
        for _, _, process, relay in runs:
            process.wait()
            relay.join()
    finally:
        for _, _, process, _ in runs:
            if process.poll() is None:
                process.terminate()
    minutes = (time.monotonic() - started) / 60
    for number, names, process, _ in runs:
        verdict = "passed" if process.returncode == 0 else f"FAILED (exit {process.returncode})"
        print(f"lane {number} ({', '.join(names)}): {verdict}")
    print(f"both lanes ended in {minutes:.1f} minutes")
    return 0 if all(process.returncode == 0 for _, _, process, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
