"""The ColBERT example of docs/integrations.md (poolrag's docs, in this repository) runs as written,
on local model folders, and prints its first answer; a user's type checker takes it as written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from poolrag.testing.doc_snippets import runnable_blocks
from poolrag.testing.type_checks import mypy_strict

INTEGRATIONS_MD = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
BLOCKS = runnable_blocks(INTEGRATIONS_MD, "llama-index-retrievers-poolrag")
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_have_an_example_of_this_package() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS)
@pytest.mark.usefixtures("llama_index_settings")
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_example_runs(code: str, run_doc_example: Callable[[str, str], str]) -> None:
    printed = run_doc_example(code, "docs/integrations.md")
    assert "Paris is the capital of France." in printed.splitlines()[0]


@pytest.mark.parametrize("code", BLOCKS)
def test_example_passes_mypy_strict(code: str, tmp_path: Path) -> None:
    example = tmp_path / "example.py"
    example.write_text(code, encoding="utf-8")
    run = mypy_strict(example, PACKAGE_ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
