"""A Qdrant local store a script never closes ends quietly with the interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from poolrag.stores import open_store
store = open_store("qdrant", "docs", path=sys.argv[1])
print("opened")
"""


def test_a_store_left_open_closes_at_exit_without_a_traceback(tmp_path: Path) -> None:
    """The integrations' ColBERT example opens a store and exits: qdrant-client closed it in
    __del__ during shutdown and printed 'ImportError: sys.meta_path is None' (poolrag keeps local
    clients in a registry, so they outlived the script's names)."""
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "q")], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0 and run.stdout == "opened\n", run.stderr
    assert run.stderr == "", run.stderr
