"""The LangChain examples of docs/integrations.md run as written (with local model folders)."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_snippets import runnable_blocks, with_local_models

BLOCKS = runnable_blocks("integrations.md", "langchain")


def test_the_docs_have_langchain_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(
    index: int, minilm_path: Path, assets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = {
        "sentence-transformers/all-MiniLM-L6-v2": minilm_path,
        "cross-encoder/ms-marco-MiniLM-L-12-v2": assets / "ms-marco-MiniLM-L-12-v2",
        "answerdotai/answerai-colbert-small-v1": assets / "colbert-pylate",
    }
    code = with_local_models(BLOCKS[index], models)
    assert all(f'"{hub_id}"' not in code for hub_id in models)
    exec(compile(code, f"docs/integrations.md[langchain {index}]", "exec"), {})
    printed = capsys.readouterr().out
    assert "Paris is the capital of France." in printed.splitlines()[0]  # each example's first answer
