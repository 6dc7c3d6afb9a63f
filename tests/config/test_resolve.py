"""A model argument is a local folder, a hub id (``name`` or ``org/name``), or a path that does not
name a folder: the last is refused as such, without asking the hub about it."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest

from poolrag import ModelLoadError
from poolrag.config.resolve import resolve_model_path

MISSING = ["/nonexistent/model", "/models/x", "./models/minilm", "~/models/x", "a/b/c"]


@pytest.fixture
def hub_asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids the hub was asked for; it answers as an unreachable hub does, whatever the network."""
    asked: list[str] = []

    def unreachable(repo_id: str, **_: object) -> str:
        asked.append(repo_id)
        raise OSError("no network in this test")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    return asked


@pytest.mark.parametrize("missing", MISSING)
def test_a_path_that_names_no_folder_is_refused_as_a_path(missing: str, hub_asked: list[str]) -> None:
    with pytest.raises(ModelLoadError, match=r"^model path .* is not a folder$"):
        resolve_model_path(missing)
    assert hub_asked == []


def test_a_file_is_not_a_model_folder(tmp_path: Path, hub_asked: list[str]) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="is not a folder"):
        resolve_model_path(tmp_path / "model.safetensors")
    assert hub_asked == []


@pytest.mark.parametrize("hub_id", ["BAAI/bge-base-en-v1.5", "bert-base-uncased"])
def test_a_hub_id_goes_to_the_hub(hub_id: str, hub_asked: list[str]) -> None:
    with pytest.raises(ModelLoadError, match="is a Hugging Face hub id, which needs network access"):
        resolve_model_path(hub_id)
    assert hub_asked == [hub_id]


def test_a_folder_is_used_as_it_is(tmp_path: Path) -> None:
    assert resolve_model_path(tmp_path) == tmp_path.resolve()
