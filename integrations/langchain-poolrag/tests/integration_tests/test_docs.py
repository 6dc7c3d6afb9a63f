"""The LangChain examples of docs/integrations.md run as written (with local model folders)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from doc_snippets import runnable_blocks

BLOCKS = runnable_blocks("integrations.md", "langchain")


def test_the_docs_have_langchain_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int, run_doc_example: Callable[[str, str], str]) -> None:
    printed = run_doc_example(BLOCKS[index], f"docs/integrations.md[langchain {index}]")
    assert "Paris is the capital of France." in printed.splitlines()[0]  # each example's first answer
