"""The LlamaIndex examples of docs/integrations.md run as written (with local model folders)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_snippets import runnable_blocks, with_local_models
from llama_index.core import Settings

BLOCKS = runnable_blocks("integrations.md", "llamaindex")


@pytest.fixture
def restore_settings() -> Iterator[None]:
    saved = (Settings._embed_model, Settings._llm)
    yield
    Settings._embed_model, Settings._llm = saved


def test_the_docs_have_llamaindex_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_example_runs(
    index: int, minilm_path: Path, assets: Path, capsys: pytest.CaptureFixture[str], restore_settings: None
) -> None:
    models = {
        "sentence-transformers/all-MiniLM-L6-v2": minilm_path,
        "cross-encoder/ms-marco-MiniLM-L-12-v2": assets / "ms-marco-MiniLM-L-12-v2",
        "answerdotai/answerai-colbert-small-v1": assets / "colbert-pylate",
    }
    code = with_local_models(BLOCKS[index], models)
    assert all(f'"{hub_id}"' not in code for hub_id in models)
    exec(compile(code, f"docs/integrations.md[llamaindex {index}]", "exec"), {})
    assert "Paris is the capital of France." in capsys.readouterr().out.splitlines()[0]
