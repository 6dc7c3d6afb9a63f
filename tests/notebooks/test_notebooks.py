"""The notebooks are executed, not decoration: each runs top to bottom (its cells assert) on the
installed package alone, git holds it stripped, and its rendered copy (with the plots) is what a
run of the current source printed.

Refresh a notebook and its rendered copy with
``python tests/notebooks/notebook_runner.py notebooks/<name>.ipynb --render``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_runner import (
    REPO,
    SKIPPED,
    STABLE_OUTPUT_TAG,
    execute,
    is_stripped,
    notebooks,
    output_problems,
    png_outputs,
    refresh_command,
    rendered_path,
    stable_output_changes,
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
    "poolrag.testing (test helpers, not a reader's API)": re.compile(r"\bpoolrag\.testing\b"),
    "scripts/ or tests/": re.compile(r"(?<![\w.-])(?:\.\./)?(?:scripts|tests)/"),
    "an import from scripts, tests or benchmarks": re.compile(
        r"^\s*(?:from|import)\s+(?:scripts|tests|benchmarks)\b", re.MULTILINE
    ),
}


def _code(notebook: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def _cells(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


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
    # the prose too: the rendered copy is the one GitHub shows, so its text must be the notebook's
    assert _cells(executed) == _cells(source), (
        f"rendered/{path.name} shows an older version of the notebook's text; refresh it with: "
        f"{refresh_command(path)}"
    )
    problems = output_problems(executed)
    assert not problems, "\n".join(problems) + f"\nrefresh with: {refresh_command(path)}"
    if _plots(source):
        assert list(png_outputs(executed)), f"rendered/{path.name} uses matplotlib but holds no PNG"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_cleanly(path: Path) -> None:
    """A fresh run in this environment's Python: every cell passes its asserts, and the outputs are
    clean (no errors, nothing on stderr, no part skipped, no local paths, cells in order). The cells
    tagged ``stable-output`` (error messages and the like) print what the rendered copy shows."""
    notebook = execute(path)  # raises CellExecutionError if a cell fails
    problems = output_problems(notebook)
    assert not problems, "\n".join(problems)
    rendered = rendered_path(path)
    if rendered.exists():  # a missing copy fails test_rendered_copy_is_current
        changes = stable_output_changes(notebook, nbformat.read(rendered, as_version=4))
        assert not changes, (
            f"rendered/{path.name} shows outputs a fresh run no longer prints:\n"
            + "\n".join(changes)
            + f"\nrefresh it with: {refresh_command(path)}"
        )


def test_a_skipped_part_is_a_problem() -> None:
    """A part a notebook skips on a machine without what it needs is not a clean run: CI must run it,
    and the rendered copy must show it."""
    cell = nbformat.v4.new_code_cell("print(...)", execution_count=1)
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"{SKIPPED} the real FAQ.\nno apt-get\n")
    ]
    problems = output_problems(nbformat.v4.new_notebook(cells=[cell]))
    assert len(problems) == 1 and SKIPPED in problems[0] and "no apt-get" in problems[0], problems


def test_a_changed_stable_output_is_caught() -> None:
    """A ``stable-output`` cell (an error message) printing other text than the rendered copy shows
    makes that copy stale; untagged cells (timings, scores) may differ freely."""

    def run(*texts: str) -> nbformat.NotebookNode:
        cells = [nbformat.v4.new_code_cell(f"print({k})", execution_count=k + 1) for k in range(len(texts))]
        for cell, text in zip(cells, texts, strict=True):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        cells[0].metadata["tags"] = [STABLE_OUTPUT_TAG]
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# a"), *cells])

    fresh = run("input[0] must be a text, not int\n", "12.5 texts/s\n")
    assert stable_output_changes(fresh, run("input[0] must be a text, not int\n", "11.9 texts/s\n")) == []
    (change,) = stable_output_changes(fresh, run("input[0] must be a string, not int\n", "12.5 texts/s\n"))
    assert change.startswith("code cell 1:") and "must be a string" in change, change


# Notebook 04 fetches the Debian FAQ with benchmarks/real_datasets.py; where it cannot, the script must
# say why in one line (the notebook shows that line), not end in a CalledProcessError.
FAKE_APT = {
    "not root": (
        'echo "E: Could not open lock file /var/lib/apt/lists/lock - open (13: Permission denied)" >&2; '
        "exit 100"
    ),
    "offline": (
        'if [ "$1" = update ]; then echo "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease'
        "  Temporary failure resolving 'deb.debian.org'\" >&2; exit 0; fi; "
        'echo "E: Unable to locate package $2" >&2; exit 100'
    ),
}


@pytest.mark.skipif(os.name == "nt", reason="stands in for apt-get with a POSIX shell script")
@pytest.mark.parametrize("apt", [None, *FAKE_APT], ids=["no apt-get", *FAKE_APT])
def test_the_real_data_script_says_in_one_line_why_it_cannot_fetch(apt: str | None, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if apt is not None:
        (bin_dir / "apt-get").write_text(f"#!/bin/sh\n{FAKE_APT[apt]}\n")
        (bin_dir / "apt-get").chmod(0o755)
    command = [sys.executable, str(REPO / "benchmarks" / "real_datasets.py"), "--sets", "debian-faq-en"]
    done = subprocess.run(
        [*command, "--dest", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(bin_dir)},
    )
    assert done.returncode == 1 and not done.stdout, done
    (line,) = done.stderr.splitlines()  # one line, no traceback
    assert line.startswith("real_datasets.py: cannot build debian-faq-en: "), line
    assert "apt-get (Debian or Ubuntu)" in line and "network" in line, line  # what it needs
    reason = {
        None: "`apt-get update` could not start: no apt-get on this machine",
        "not root": "`apt-get update` failed: E: Could not open lock file",
        "offline": "`apt-get download debian-faq` failed: E: Unable to locate package debian-faq",
    }[apt]
    assert reason in line, line
    if apt == "offline":  # apt-get update only warned, yet its warning is the real reason
        assert "apt-get update could not refresh the package lists: W: Failed to fetch" in line, line
