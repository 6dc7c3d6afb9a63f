"""Client programs in other languages (tests/server/clients/), run against a live server.

A program whose runtime is missing fails the test in one line naming the packages to install: a
skip would let a machine without them pass for clients it never ran.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CLIENTS = Path(__file__).resolve().parent / "clients"
TIMEOUT_S = 60


def program(name: str, debian_packages: str) -> str:
    """The path of ``name`` on this machine, or the test fails naming what to install."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install it (Debian: apt-get install {debian_packages})", False)
    return found


def run_client(command: list[str], stdin: str) -> Any:
    """The JSON that ``command`` (run in the clients' folder, ``stdin`` given) prints."""
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, encoding="utf-8", cwd=CLIENTS, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)
