"""``mypy --strict`` over a partner package's typed usage file, reading the package as its users'
checkers read it.

The partner packages' tests install them editable, and setuptools' editable finders are import hooks
a checker never runs: the package's own folder goes on ``MYPYPATH`` instead (a LlamaIndex leaf joins
the ``llama_index`` namespace of llama-index-core there, PEP 420). The runs of one environment share a
cache in it: the frameworks' own modules, most of each run's work, are read once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def mypy_strict(usage: Path, package_root: Path) -> subprocess.CompletedProcess[str]:
    """mypy's run over ``usage`` with the distribution in ``package_root`` importable; poolrag's and
    the frameworks' own internals are followed silently (their errors are not what this checks)."""
    env = {**os.environ, "MYPYPATH": str(package_root)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            f"--cache-dir={Path(sys.prefix) / 'mypy-cache'}",
            str(usage),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
