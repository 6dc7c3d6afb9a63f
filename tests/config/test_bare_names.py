"""A model named without an organisation resolves as sentence-transformers resolves it
(``SentenceTransformer("all-MiniLM-L6-v2")`` loads ``sentence-transformers/all-MiniLM-L6-v2``),
then as given (the hub's old top-level ids, ``bert-base-uncased``), so the short names tutorials
use work, offline too for the packaged MiniLM (issue 45 item 5)."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import numpy as np
import pytest

from poolrag import Engine, ModelLoadError
from poolrag.config.resolve import resolve_model_path

TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday."]


@pytest.fixture
def hub_with(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Path], list[str]]:
    """A hub holding the repositories put in the returned dict; the ids it was asked for."""
    repos: dict[str, Path] = {}
    asked: list[str] = []

    def snapshot_download(repo_id: str, **_: object) -> str:
        asked.append(repo_id)
        if repo_id not in repos:
            raise OSError(f"{repo_id} is not on this hub")
        return str(repos[repo_id])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return repos, asked


def test_a_bare_name_is_sentence_transformers_model_first(
    hub_with: tuple[dict[str, Path], list[str]], minilm_path: Path
) -> None:
    repos, asked = hub_with
    repos["sentence-transformers/paraphrase-MiniLM-L3-v2"] = minilm_path
    assert resolve_model_path("paraphrase-MiniLM-L3-v2") == minilm_path
    assert asked == ["sentence-transformers/paraphrase-MiniLM-L3-v2"]


def test_a_bare_name_sentence_transformers_lacks_is_asked_for_as_given(
    hub_with: tuple[dict[str, Path], list[str]], tmp_path: Path
) -> None:
    repos, asked = hub_with
    repos["bert-base-uncased"] = tmp_path
    assert resolve_model_path("bert-base-uncased") == tmp_path
    assert asked == ["sentence-transformers/bert-base-uncased", "bert-base-uncased"]


def test_an_id_with_an_organisation_is_asked_for_as_given(
    hub_with: tuple[dict[str, Path], list[str]],
) -> None:
    _, asked = hub_with
    with pytest.raises(ModelLoadError, match=r"'BAAI/bge-small-en-v1\.5'.*needs network access"):
        resolve_model_path("BAAI/bge-small-en-v1.5")
    assert asked == ["BAAI/bge-small-en-v1.5"]
    asked.clear()
    with pytest.raises(ModelLoadError, match=r"'all-MiniLM-L12-v2'.*needs network access"):
        resolve_model_path("all-MiniLM-L12-v2")  # neither there: the error names what was given
    assert asked == ["sentence-transformers/all-MiniLM-L12-v2", "all-MiniLM-L12-v2"]


def test_the_packaged_minilm_loads_offline_by_its_short_name(minilm_engine: Engine) -> None:
    """The suite runs with HF_HUB_OFFLINE=1 and no hub cache: the installed package's copy answers."""
    engine = Engine("all-MiniLM-L6-v2", tune="off")
    assert engine.model_folder.resolve() == minilm_engine.model_folder.resolve()
    np.testing.assert_array_equal(engine.embed_array(TEXTS), minilm_engine.embed_array(TEXTS))
    assert engine.facts.model_name == "all-MiniLM-L6-v2"  # the name the caller gave
