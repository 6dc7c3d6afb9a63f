"""The LangChain examples of docs/integrations.md (poolrag's docs, in this repository) run as written
(with local model folders)."""

from __future__ import annotations

import re
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


def test_the_rerank_example_prints_what_the_docs_say(run_doc_example: Callable[[str, str], str]) -> None:
    """The cross-encoder's own order and sigmoid scores, as the docs print them."""
    (code,) = [block for block in BLOCKS if "PoolragReranker(" in block]
    said = re.search(r"The example prints\n\n```text\n(.*?)```", INTEGRATIONS_MD.read_text(), re.S)
    assert said is not None
    assert run_doc_example(code, "docs/integrations.md[langchain rerank]") == said.group(1)
