"""docs/architecture.md's layer map is the code's: regenerated from the layer order, it is unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_layer_map_in_docs_architecture_is_what_the_code_generates() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "architecture_doc.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
