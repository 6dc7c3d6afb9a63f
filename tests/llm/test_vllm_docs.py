"""docs/vllm.md's ``<!-- runnable: vllm -->`` blocks run, offline, on local models of the same kind."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import transformers
from decoders.tiny_decoders import build

from poolrag.testing.doc_snippets import runnable_blocks, with_local_models

BLOCKS = runnable_blocks(Path(__file__).resolve().parents[2] / "docs" / "vllm.md", "vllm")


def test_the_page_has_runnable_blocks() -> None:
    assert len(BLOCKS) == 6


@pytest.fixture(scope="module")
def models(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    reranker = tmp_path_factory.mktemp("qwen3-reranker")
    build(reranker, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    return {"sentence-transformers/all-MiniLM-L6-v2": minilm_path, "Qwen/Qwen3-Reranker-0.6B": reranker}


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_block_runs(models: dict[str, Path], index: int) -> None:
    code = with_local_models(BLOCKS[index], models)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"docs/vllm.md block {index}", "exec"), {})
    assert printed.getvalue().strip()


def test_the_page_names_exactly_what_poolrag_vllm_provides() -> None:
    """The page's import table lists the vLLM names a script imports from ``poolrag.vllm`` instead;
    every one is there (it claimed one changed import, and vLLM's examples import more), and
    vLLM's script helpers, no part of its pooling API, are not."""
    import poolrag.vllm

    page = (Path(__file__).resolve().parents[2] / "docs" / "vllm.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `from vllm")]
    named = {name for row in rows for name in re.findall(r"\b[A-Z]\w+", row.split("|")[1])}
    assert {"LLM", "PoolerConfig", "LateChunkingParams", "PoolingRequestOutput"} <= named
    assert named == set(poolrag.vllm.__all__) - {"LateChunk", "LateChunkingMetadata"}
    for helper in ("FlexibleArgumentParser", "print_embeddings", "serial_utils"):
        assert "`vllm.utils" in page and helper in page and not hasattr(poolrag.vllm, helper)
