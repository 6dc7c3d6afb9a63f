"""Run the notebooks with nbclient and check that their outputs are fit to keep in git.

After editing a notebook, refresh its saved outputs from the repository root (the environment
needs ``pip install -c constraints-cpu.txt -e ".[notebooks]"``)::

    python tests/notebooks/notebook_runner.py                      # every notebook
    python tests/notebooks/notebook_runner.py notebooks/01_engine_tour.ipynb

A notebook is written back only if its fresh outputs pass :func:`output_problems`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
# A code cell that is meant to print nothing carries this tag (cell.metadata.tags).
NO_OUTPUT_TAG = "no-output"
_LOCAL_PATH = re.compile(r"(?<![\w.:/])(?:/work|/tmp|/root|/home|/Users|/var/folders|/private/var)(?=/|\b)")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\(?:Users|Windows|tmp|Temp)\b", re.IGNORECASE)


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


@contextmanager
def _this_python_kernel() -> Iterator[None]:
    """Make the ``python3`` kernel this interpreter, whatever kernelspecs the machine has.

    JUPYTER_PATH is searched before the user's and the system's kernel folders.
    """
    from ipykernel.kernelspec import write_kernel_spec

    previous = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory(prefix="poolrag-kernel-") as tmp:
        write_kernel_spec(Path(tmp) / "kernels" / "python3")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (tmp, previous) if p)
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = previous


def execute(path: Path) -> nbformat.NotebookNode:
    """Run a notebook top to bottom from its own folder, as a reader would; raises on a cell error."""
    notebook = nbformat.read(path, as_version=4)
    with _this_python_kernel():
        NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    return notebook


def _texts(output: dict) -> Iterator[str]:
    """Every piece of text an output holds (stream text, rich data, error fields)."""
    for key in ("text", "ename", "evalue"):
        if isinstance(output.get(key), str):
            yield output[key]
    yield from output.get("traceback", [])
    for value in output.get("data", {}).values():
        yield value if isinstance(value, str) else json.dumps(value)
    if output.get("metadata"):
        yield json.dumps(output["metadata"])


def _local_paths(text: str) -> list[str]:
    found = [m.group(0) for m in (*_LOCAL_PATH.finditer(text), *_WINDOWS_PATH.finditer(text))]
    literals = (str(Path.home()), str(NOTEBOOKS_DIR.parent))  # wherever this machine keeps them
    found += [literal for literal in literals if len(literal) > 1 and literal in text]
    return list(dict.fromkeys(found))


def output_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """Why the notebook's outputs should not be kept as they are; empty when they are clean.

    Clean means: every code cell ran, in order, with execution counts 1, 2, 3...; no error outputs;
    nothing written to stderr (warnings, log lines); no local paths; and every code cell shows
    something unless it is tagged ``no-output``.
    """
    problems = []
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code_cells, start=1):
        where = f"code cell {number} ({cell.source.splitlines()[0] if cell.source else 'empty'!r})"
        if cell.execution_count != number:
            problems.append(f"{where}: execution count {cell.execution_count}, expected {number}")
        if not cell.outputs and NO_OUTPUT_TAG not in cell.metadata.get("tags", []):
            problems.append(f"{where}: no output (tag it {NO_OUTPUT_TAG!r} if that is intended)")
        for output in cell.outputs:
            kind = output.output_type
            if kind == "error":
                problems.append(f"{where}: error {output.get('ename')}: {output.get('evalue')}")
            if kind == "stream" and output.name == "stderr":
                problems.append(f"{where}: stderr output {output.text[:300]!r}")
            if kind == "execute_result" and output.get("execution_count") != cell.execution_count:
                problems.append(f"{where}: result numbered {output.get('execution_count')}")
            for text in _texts(output):
                for path in _local_paths(text):
                    problems.append(f"{where}: local path {path!r} in {kind} output")
        for path in _local_paths(json.dumps(cell.metadata)):
            problems.append(f"{where}: local path {path!r} in cell metadata")
    for path in _local_paths(json.dumps(notebook.metadata)):
        problems.append(f"notebook metadata: local path {path!r}")
    return problems


def _coalesce_streams(notebook: nbformat.NotebookNode) -> None:
    """Merge consecutive stdout chunks of a cell into one output, so saved diffs stay small."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        merged: list[nbformat.NotebookNode] = []
        for output in cell.outputs:
            previous = merged[-1] if merged else None
            if (
                previous is not None
                and output.output_type == previous.output_type == "stream"
                and output.name == previous.name
            ):
                previous.text += output.text
            else:
                merged.append(output)
        cell.outputs = merged


def refresh(path: Path) -> list[str]:
    """Execute ``path`` and write it back with its new outputs, unless they have problems."""
    notebook = execute(path)
    _coalesce_streams(notebook)
    problems = output_problems(notebook)
    if not problems:
        nbformat.validate(notebook)
        nbformat.write(notebook, path)
    return problems


def main(argv: list[str]) -> int:
    paths = [Path(arg).resolve() for arg in argv] or notebooks()
    failed = False
    for path in paths:
        problems = refresh(path)
        print(f"{path.name}: {'refreshed' if not problems else 'NOT written'}")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
