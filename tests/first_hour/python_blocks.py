"""Runs a page's Python blocks in one namespace, one at a time, in the environment under test.

Started by documented_commands.py with that environment's python (``python python_blocks.py DIR``):
each line read from stdin names a file ``DIR/N.py``; the block is executed as written in the page's
namespace (blocks build on each other, as a reader runs them), what it prints is kept, and
``DIR/N.json`` gets ``{"printed": ..., "error": ...}`` before ``done N`` is written back.
Standard library only: it must not add anything to the environment it checks.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from pathlib import Path


class _Tee(io.TextIOBase):
    """Keeps what a block prints and still shows it in the session's log."""

    def __init__(self, shown: io.TextIOBase) -> None:
        self.kept = io.StringIO()
        self.shown = shown

    def write(self, text: str) -> int:
        self.kept.write(text)
        self.shown.write(text)
        return len(text)

    def flush(self) -> None:
        self.shown.flush()


def main() -> int:
    folder = Path(sys.argv[1])
    replies = sys.stdout
    namespace: dict[str, object] = {"__name__": "__main__"}
    for line in sys.stdin:
        number = line.strip()
        source = folder / f"{number}.py"
        tee = _Tee(sys.stderr)
        error = None
        with contextlib.redirect_stdout(tee):
            try:
                exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)
            except BaseException:  # a block's failure is its result, reported by the runner
                error = traceback.format_exc()
        result = {"printed": tee.kept.getvalue(), "error": error}
        (folder / f"{number}.json").write_text(json.dumps(result), encoding="utf-8")
        replies.write(f"done {number}\n")
        replies.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
