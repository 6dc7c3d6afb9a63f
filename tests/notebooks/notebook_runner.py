"""Run the notebooks with nbclient, keep them stripped in git and their executed copies in rendered/.

Git holds each notebook without outputs (``notebooks/*.ipynb``) and, next to it, the copy a fresh
run produced, with its plots (``notebooks/rendered/*.ipynb``, which GitHub renders). After editing
a notebook, refresh both from the repository root::

    python tests/notebooks/notebook_runner.py notebooks/01_quickstart.ipynb --render
    python tests/notebooks/notebook_runner.py --render --images /tmp/nbimg   # every notebook

Nothing is written for a notebook whose fresh outputs have problems (:func:`output_problems`),
a part it skipped on this machine among them.
``--images DIR`` also saves every PNG output as ``DIR/<stem>_cell<N>_<k>.png`` (N: the code cell's
execution count, k: the image's place in that cell), so a person can look at each plot.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO / "notebooks"
RENDERED_DIR = NOTEBOOKS_DIR / "rendered"
# A code cell that is meant to print nothing carries this tag (cell.metadata.tags).
NO_OUTPUT_TAG = "no-output"
# A code cell whose printed text is the same on every machine and every run (error messages, counts)
# carries this tag: the tests compare what a fresh run prints with the rendered copy.
STABLE_OUTPUT_TAG = "stable-output"
# A notebook part that cannot run on this machine (a download that needs apt-get, say) prints a line
# starting with this and the reason, instead of failing; the headless run counts it as a problem, so
# CI runs every part and the rendered copy shows every part.
SKIPPED = "Skipped on this machine:"
CELL_TIMEOUT_S = 600
# Cell metadata worth keeping in git; the rest (execution timings, collapsed/scrolled view state)
# changes with every run or every viewer.
_KEPT_CELL_METADATA = ("tags",)
# A live widget's output (tqdm's notebook bar among them): saved, it is the text of its first frame.
_WIDGET = "application/vnd.jupyter.widget-view+json"
_LOCAL_PATH = re.compile(r"(?<![\w.:/])(?:/work|/tmp|/root|/home|/Users|/var/folders|/private/var)(?=/|\b)")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\(?:Users|Windows|tmp|Temp)\b", re.IGNORECASE)


def notebooks() -> list[Path]:
    """The notebooks in ``notebooks/`` (the rendered copies are not notebooks of their own)."""
    return sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def rendered_path(path: Path) -> Path:
    return RENDERED_DIR / path.name


def refresh_command(path: Path) -> str:
    return f"python tests/notebooks/notebook_runner.py notebooks/{path.name} --render"


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
    """Run a notebook top to bottom with cwd ``notebooks/``, as a reader would (so
    ``Path.cwd().parent / "samples"`` is the repository's samples); raises on a cell error."""
    notebook = nbformat.read(path, as_version=4)
    with _this_python_kernel():
        NotebookClient(
            notebook,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
        ).execute()
    _coalesce_streams(notebook)
    return notebook


def _normalise_metadata(notebook: nbformat.NotebookNode) -> None:
    """Keep the metadata that means something to a reader; drop what differs between machines
    (the kernel's display name, the exact Python version) and between runs."""
    notebook.metadata = nbformat.from_dict(
        {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
    )
    for cell in notebook.cells:
        kept = {key: cell.metadata[key] for key in _KEPT_CELL_METADATA if key in cell.metadata}
        cell.metadata = nbformat.from_dict(kept)


def strip(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy without outputs, execution counts and volatile metadata: what git holds."""
    stripped = copy.deepcopy(notebook)
    _normalise_metadata(stripped)
    for cell in stripped.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return stripped


def is_stripped(notebook: nbformat.NotebookNode) -> bool:
    return strip(notebook) == notebook


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
    literals = (str(Path.home()), str(REPO))  # wherever this machine keeps them
    found += [literal for literal in literals if len(literal) > 1 and literal in text]
    return list(dict.fromkeys(found))


def output_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """Why an executed notebook's outputs should not be kept as they are; empty when they are clean.

    Clean means: every code cell ran, in order, with execution counts 1, 2, 3...; no error outputs;
    nothing written to stderr (warnings, log lines); no widgets (a progress bar saves as "0%"); no
    part skipped (a stdout line starting with :data:`SKIPPED`); no local paths; and every code cell
    shows something unless it is tagged ``no-output``.
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
            if kind == "stream" and output.name == "stdout" and _skipped(output.text):
                problems.append(f"{where}: {_skipped(output.text)[:600]}")
            if _WIDGET in output.get("data", {}):
                problems.append(f"{where}: a widget (a progress bar?): saved, it shows its first frame only")
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


def _skipped(text: str) -> str:
    """From the first line starting with :data:`SKIPPED` to the end (the reason follows it); or ''."""
    lines = text.splitlines()
    first = next((k for k, line in enumerate(lines) if line.startswith(SKIPPED)), None)
    return "" if first is None else " ".join(line.strip() for line in lines[first:])


def printed(cell: nbformat.NotebookNode) -> list[str]:
    """The text a code cell shows: its streams, the plain text of its results, its errors."""
    texts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            texts.append(f"[{output.name}] {output.text}")
        elif output.output_type == "error":
            texts.append(f"[error] {output.ename}: {output.evalue}")
        elif "text/plain" in output.get("data", {}):
            texts.append(f"[{output.output_type}] {output.data['text/plain']}")
    return texts


def stable_output_changes(fresh: nbformat.NotebookNode, rendered: nbformat.NotebookNode) -> list[str]:
    """The cells tagged ``stable-output`` whose printed text differs between a fresh run and the
    rendered copy (cells whose source differs are left to the rendered copy's own check)."""
    changes = []
    code = [[cell for cell in notebook.cells if cell.cell_type == "code"] for notebook in (fresh, rendered)]
    for number, (now, then) in enumerate(zip(*code, strict=False), start=1):
        if STABLE_OUTPUT_TAG not in now.metadata.get("tags", []) or now.source != then.source:
            continue
        now_lines = "".join(printed(now)).splitlines()
        then_lines = "".join(printed(then)).splitlines()
        for line_now, line_then in zip_longest(now_lines, then_lines, fillvalue="(nothing)"):
            if line_now != line_then:
                changes.append(
                    f"code cell {number}: a fresh run prints {line_now!r}, the rendered copy {line_then!r}"
                )
                break
    return changes


def png_outputs(notebook: nbformat.NotebookNode) -> Iterator[tuple[int, int, bytes]]:
    """(execution count, place in the cell from 1, PNG bytes) for every image/png output."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        pngs = [o.data["image/png"] for o in cell.outputs if "image/png" in o.get("data", {})]
        for place, png in enumerate(pngs, start=1):
            yield cell.execution_count, place, base64.b64decode(png)


def _coalesce_streams(notebook: nbformat.NotebookNode) -> None:
    """Merge consecutive stream chunks of a cell into one output, so rendered diffs stay small."""
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


def refresh(path: Path, *, render: bool, images: Path | None) -> list[str]:
    """Execute ``path``; if its outputs are clean, write it back stripped and (``render``) its
    executed copy to rendered/. Images are dumped even when there are problems, to look at them."""
    notebook = execute(path)
    _normalise_metadata(notebook)
    if images is not None:
        images.mkdir(parents=True, exist_ok=True)
        for count, place, png in png_outputs(notebook):
            (images / f"{path.stem}_cell{count}_{place}.png").write_bytes(png)
    problems = output_problems(notebook)
    if problems:
        return problems
    nbformat.validate(notebook)
    nbformat.write(strip(notebook), path)
    if render:
        RENDERED_DIR.mkdir(exist_ok=True)
        nbformat.write(notebook, rendered_path(path))
    return []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to run (default: every one)")
    parser.add_argument("--render", action="store_true", help="also write notebooks/rendered/<name>")
    parser.add_argument("--images", type=Path, metavar="DIR", help="save every PNG output here")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or notebooks()
    failed = False
    for path in paths:
        problems = refresh(path, render=args.render, images=args.images)
        written = "stripped" + (" and rendered" if args.render else "")
        print(f"{path.name}: {written if not problems else 'NOT written'}")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
