"""The retrieve-then-rerank example of docs/integrations.md (poolrag's docs, in this repository) runs
as written, on local model folders, and prints its first answer."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from poolrag.testing.doc_snippets import runnable_blocks

INTEGRATIONS_MD = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
BLOCKS = runnable_blocks(INTEGRATIONS_MD, "llama-index-postprocessor-poolrag-rerank")


def test_the_docs_have_an_example_of_this_package() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS)
@pytest.mark.usefixtures("llama_index_settings")
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_example_runs(code: str, run_doc_example: Callable[[str, str], str]) -> None:
    printed = run_doc_example(code, "docs/integrations.md")
    assert "Paris is the capital of France." in printed.splitlines()[0]
    # the cross-encoder's own order and sigmoid scores: the lines the docs print for LangChain's example
    said = re.search(r"The example prints\n\n```text\n(.*?)```", INTEGRATIONS_MD.read_text(), re.S)
    assert said is not None and printed == said.group(1)
