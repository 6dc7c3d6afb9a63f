"""Code blocks of the docs that are marked ``<!-- runnable: TAG -->``, for tests that execute them.

Docs name hub models; tests substitute local folders of the same kind so the snippets run offline.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"<!-- runnable: (?P<tag>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.S)


def runnable_blocks(doc: str, tag: str) -> list[str]:
    """The marked Python blocks of ``docs/<doc>`` for ``tag``, in document order."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    return [m["code"] for m in _BLOCK.finditer(text) if m["tag"] == tag]


def with_local_models(code: str, models: dict[str, Path]) -> str:
    for hub_id, folder in models.items():
        code = code.replace(f'"{hub_id}"', repr(str(folder)))
    return code
