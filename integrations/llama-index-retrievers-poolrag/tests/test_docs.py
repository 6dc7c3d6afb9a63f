"""The ColBERT example of docs/integrations.md (poolrag's docs, in this repository) that this
package's classes run, as written but on local model folders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from poolrag.testing.doc_snippets import runnable_blocks

INTEGRATIONS_MD = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
BLOCKS = runnable_blocks(INTEGRATIONS_MD, "llama-index-retrievers-poolrag")


def test_the_docs_have_an_example_of_this_package() -> None:
    assert BLOCKS


@pytest.mark.parametrize("index", range(len(BLOCKS)))
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_example_runs(index: int, run_doc_example: Callable[[str, str], str]) -> None:
    printed = run_doc_example(BLOCKS[index], f"docs/integrations.md[example {index}]")
    assert "Paris is the capital of France." in printed.splitlines()[0]  # each example's first answer
