"""The notebooks are executed, not decoration: each runs top to bottom (their cells assert), and the
outputs saved in git are what a fresh run prints, free of warnings and local paths.

Refresh the saved outputs with ``python tests/notebooks/notebook_runner.py``.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from notebook_runner import execute, notebooks, output_problems

NOTEBOOKS = notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_saved_outputs_are_clean(path: Path) -> None:
    """What git holds: executed in order, no errors, no stderr (warnings), no local paths."""
    problems = output_problems(nbformat.read(path, as_version=4))
    assert not problems, "\n".join(problems) + "\nrefresh with: python tests/notebooks/notebook_runner.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebooks_use_only_the_installed_package(path: Path) -> None:
    cells = nbformat.read(path, as_version=4).cells
    source = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    for forbidden in ("sys.path", "build_test_assets", "scripts", "ensure_assets"):
        assert forbidden not in source, f"{path.name} uses {forbidden}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_cleanly(path: Path) -> None:
    """A fresh run in this environment's python: every cell passes its asserts, and the outputs
    are as clean as the saved ones must be."""
    notebook = execute(path)  # raises CellExecutionError if a cell fails
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)
