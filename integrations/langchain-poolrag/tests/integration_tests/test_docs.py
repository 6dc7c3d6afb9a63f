"""The LangChain examples of docs/integrations.md (poolrag's docs, in this repository) run as written
(with local model folders)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from poolrag.testing.doc_snippets import runnable_blocks

INTEGRATIONS_MD = Path(__file__).resolve().parents[4] / "docs" / "integrations.md"
BLOCKS = runnable_blocks(INTEGRATIONS_MD, "langchain")


def test_the_docs_have_langchain_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int, run_doc_example: Callable[[str, str], str]) -> None:
    printed = run_doc_example(BLOCKS[index], f"docs/integrations.md[langchain {index}]")
    assert "Paris is the capital of France." in printed.splitlines()[0]  # each example's first answer
