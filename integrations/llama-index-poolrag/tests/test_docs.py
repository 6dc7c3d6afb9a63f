"""The LlamaIndex examples of docs/integrations.md run as written (with local model folders)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from doc_snippets import runnable_blocks
from llama_index.core import Settings

BLOCKS = runnable_blocks("integrations.md", "llamaindex")


@pytest.fixture
def restore_settings() -> Iterator[None]:
    """The examples set LlamaIndex's process-global Settings: restore what was there."""
    saved = (Settings._embed_model, Settings._llm)
    yield
    Settings._embed_model, Settings._llm = saved


def test_the_docs_have_llamaindex_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_example_runs(index: int, run_doc_example: Callable[[str, str], str], restore_settings: None) -> None:
    printed = run_doc_example(BLOCKS[index], f"docs/integrations.md[llamaindex {index}]")
    assert "Paris is the capital of France." in printed.splitlines()[0]  # each example's first answer
