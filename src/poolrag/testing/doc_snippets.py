"""Code blocks of a Markdown page that are marked ``<!-- runnable: TAG -->``, for tests that execute them.

Docs name hub models; tests substitute local folders of the same kind so the snippets run offline.
The page is given by path: the docs live in the repository, not in the installed package.
"""

from __future__ import annotations

import re
from pathlib import Path

_BLOCK = re.compile(r"<!-- runnable: (?P<tag>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.S)


def runnable_blocks(page: Path, tag: str) -> list[str]:
    """The marked Python blocks of the Markdown file ``page`` for ``tag``, in document order."""
    text = page.read_text(encoding="utf-8")
    return [m["code"] for m in _BLOCK.finditer(text) if m["tag"] == tag]


def with_local_models(code: str, models: dict[str, Path]) -> str:
    """``code`` with each quoted hub id of ``models`` replaced by its local folder."""
    for hub_id, folder in models.items():
        code = code.replace(f'"{hub_id}"', repr(str(folder)))
    return code
