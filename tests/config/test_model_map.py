"""``$POOLRAG_MODEL_MAP`` answers hub ids with local folders, before the hub is asked, for every door
that resolves a model; a bad entry is one line naming the variable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, ModelLoadError
from poolrag.config.model_map import ENV_VAR
from poolrag.config.resolve import resolve_model_path, resolve_tokenizer_folder


def test_a_mapped_hub_id_is_its_folder_and_the_hub_is_not_asked(
    minilm_path: Path, tmp_path: Path, hub_asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    entries = f"org/embedder={minilm_path}, org/other = {other}\norg/tokenizer={minilm_path}"
    monkeypatch.setenv(ENV_VAR, entries)
    assert resolve_model_path("org/embedder") == minilm_path.resolve()
    assert resolve_model_path("org/other") == other.resolve()
    assert resolve_tokenizer_folder("org/tokenizer") == minilm_path.resolve()
    assert hub_asked == []
    with pytest.raises(ModelLoadError, match="hub id"):  # an id the map does not name still goes there
        resolve_model_path("org/unmapped")
    assert hub_asked == ["org/unmapped"]


def test_home_is_expanded(minilm_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(minilm_path.parent))
    monkeypatch.setenv(ENV_VAR, f"org/embedder=~/{minilm_path.name}")
    assert resolve_model_path("org/embedder") == minilm_path.resolve()


def test_an_engine_made_from_a_mapped_id_is_the_folders_model(
    minilm_path: Path, hub_asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["a cat", "tax law"]
    with Engine(minilm_path, tune="off") as engine:
        expected = engine.embed_array(texts)
    monkeypatch.setenv(ENV_VAR, f"sentence-transformers/some-embedder={minilm_path}")
    with Engine("sentence-transformers/some-embedder", tune="off") as engine:
        np.testing.assert_array_equal(engine.embed_array(texts), expected)
        assert engine.facts.model_name == "sentence-transformers/some-embedder"
    assert hub_asked == []


@pytest.mark.parametrize("value", ["org/model", "=/some/folder", "org/model=", "a=b,,org/model"])
def test_an_entry_that_is_not_hub_id_equals_folder_is_one_line_naming_the_variable(
    value: str, hub_asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(ModelLoadError) as refused:
        resolve_model_path("org/model")
    assert str(refused.value).startswith(f"${ENV_VAR}: ") and "\n" not in str(refused.value)
    assert hub_asked == []


def test_a_mapped_folder_that_is_missing_is_refused_not_fetched(
    tmp_path: Path, hub_asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, f"org/model={tmp_path / 'not-built'}")
    refused = rf"^\${ENV_VAR} maps 'org/model' to .*not-built', which is not a folder$"
    with pytest.raises(ModelLoadError, match=refused):
        resolve_model_path("org/model")
    assert hub_asked == []
