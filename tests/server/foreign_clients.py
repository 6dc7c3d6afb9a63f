"""Client programs in other languages (tests/server/clients/), run against a live server.

A program whose runtime is missing fails the test in one line naming the packages to install: a
skip would let a machine without them pass for clients it never ran.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "tests" / "server" / "clients"
#: a ceiling, not a speed: ``java PostJson.java`` compiles the program first (about 4 s on 2 cores
#: beside one test run, several times that in CI's two lanes), and a JVM or Node starts slowly there too
TIMEOUT_S = 300


def npm_install_command() -> str:
    """The command that installs the JavaScript clients' npm packages, as the tests nox session runs
    it (noxfile.py's ``NPM_CLIENTS_INSTALL``, read without importing nox)."""
    for node in ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "NPM_CLIENTS_INSTALL":
            return " ".join(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py has no NPM_CLIENTS_INSTALL")


def program(name: str, debian_packages: str) -> str:
    """The path of ``name`` on this machine, or the test fails naming what to install."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install it (Debian: apt-get install {debian_packages})", False)
    return found


def npm_package_version(package: str) -> str:
    """``package``'s installed version, which must be the one package-lock.json pins, or the test
    fails naming the command that installs it."""
    pinned = json.loads((CLIENTS / "package-lock.json").read_text())["packages"][f"node_modules/{package}"]
    installed = CLIENTS / "node_modules" / package / "package.json"
    version = json.loads(installed.read_text())["version"] if installed.is_file() else None
    if version != pinned["version"]:
        found = f"{package} {version} is installed" if version else f"{package} is not installed"
        pinned_here = f"package-lock.json pins {pinned['version']}"
        pytest.fail(f"{found}, {pinned_here}: run {npm_install_command()}", False)
    return version


def run_client(command: list[str], stdin: str) -> Any:
    """The JSON that ``command`` (run in the clients' folder, ``stdin`` given) prints."""
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, encoding="utf-8", cwd=CLIENTS, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)
