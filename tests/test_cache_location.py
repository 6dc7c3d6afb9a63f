"""poolrag_cache_dir: where the embedding cache, checkpoints and compiled graphs go."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag.cache import default_cache_path
from poolrag.cache_location import poolrag_cache_dir


def test_the_env_folder_wins_and_a_quoted_tilde_is_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POOLRAG_CACHE_DIR="~/pr"`` from an env file or a Dockerfile reaches poolrag unexpanded; it
    made a folder named ``~`` in whatever directory a run started in."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("POOLRAG_CACHE_DIR", "~/pr")
    assert poolrag_cache_dir() == tmp_path / "pr"
    assert default_cache_path() == tmp_path / "pr" / "embeddings.sqlite"


def test_without_the_env_folder_it_is_under_the_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POOLRAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert poolrag_cache_dir() == tmp_path / "xdg" / "poolrag"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert poolrag_cache_dir() == tmp_path / ".cache" / "poolrag"
