"""The notebooks are executed, not decoration: each runs top to bottom (its cells assert) on the
installed package alone, git holds it stripped, and its rendered copy (with the plots) is what a
run of the current source printed.

Refresh a notebook and its rendered copy with
``python tests/notebooks/notebook_runner.py notebooks/<name>.ipynb --render``.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from notebook_runner import (
    execute,
    is_stripped,
    notebooks,
    output_problems,
    png_outputs,
    refresh_command,
    rendered_path,
)

NOTEBOOKS = notebooks()
IDS = [p.stem for p in NOTEBOOKS]

# What a notebook must not lean on: the test-asset builder, the repository's scripts/ and tests/
# folders, or import paths bent to reach them. Running a benchmark script as a program of its own
# (subprocess.run([sys.executable, "../benchmarks/x.py", ...])) is fine: that is how a user runs it.
_FORBIDDEN = {
    "sys.path": re.compile(r"\bsys\.path\b"),
    "PYTHONPATH": re.compile(r"PYTHONPATH"),
    "importlib file loading": re.compile(r"spec_from_file_location|SourceFileLoader|\brunpy\b"),
    "the test-asset builder": re.compile(r"build_test_assets|ensure_assets|poolrag_test_assets"),
    "the tests' tiny models": re.compile(r"tiny_models"),
    "scripts/ or tests/": re.compile(r"(?<![\w.-])(?:\.\./)?(?:scripts|tests)/"),
    "an import from scripts, tests or benchmarks": re.compile(
        r"^\s*(?:from|import)\s+(?:scripts|tests|benchmarks)\b", re.MULTILINE
    ),
}


def _code(notebook: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def _plots(notebook: nbformat.NotebookNode) -> bool:
    return any("matplotlib" in source for source in _code(notebook))


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_in_git_is_stripped(path: Path) -> None:
    """No outputs, no execution counts, no per-run metadata: diffs show only what a person wrote."""
    assert is_stripped(nbformat.read(path, as_version=4)), (
        f"{path.name} holds outputs or volatile metadata; strip it with: {refresh_command(path)}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_uses_only_the_installed_package(path: Path) -> None:
    source = "\n".join(_code(nbformat.read(path, as_version=4)))
    found = [what for what, pattern in _FORBIDDEN.items() if pattern.search(source)]
    assert not found, f"{path.name} uses {', '.join(found)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_rendered_copy_is_current(path: Path) -> None:
    """notebooks/rendered/<name> was executed from this very source, cleanly, and shows its plots."""
    rendered = rendered_path(path)
    assert rendered.exists(), f"no rendered copy of {path.name}; write it with: {refresh_command(path)}"
    source, executed = nbformat.read(path, as_version=4), nbformat.read(rendered, as_version=4)
    assert _code(executed) == _code(source), (
        f"rendered/{path.name} was run from an older version of the notebook; refresh it with: "
        f"{refresh_command(path)}"
    )
    problems = output_problems(executed)
    assert not problems, "\n".join(problems) + f"\nrefresh with: {refresh_command(path)}"
    if _plots(source):
        assert list(png_outputs(executed)), f"rendered/{path.name} uses matplotlib but holds no PNG"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_cleanly(path: Path) -> None:
    """A fresh run in this environment's Python: every cell passes its asserts, and the outputs are
    clean (no errors, nothing on stderr, no local paths, cells in order)."""
    notebook = execute(path)  # raises CellExecutionError if a cell fails
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)
