"""Tests that only read the real-weight models find them where the builder put them, or are told in
one line which folders are missing, where, and the command that builds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag.errors import PoolragError
from poolrag.testing.test_assets import ENV_DEST, MARKER_NAME, MissingTestAssetsError, built_assets


def test_completed_folders_give_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("reranker", "colbert"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MARKER_NAME).write_text("{}")
    monkeypatch.setenv(ENV_DEST, str(tmp_path))
    assert built_assets("reranker", "colbert") == tmp_path.resolve()


def test_a_missing_or_half_written_folder_is_one_line_naming_it_and_the_build_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "reranker").mkdir()
    (tmp_path / "reranker" / MARKER_NAME).write_text("{}")
    (tmp_path / "colbert").mkdir()  # interrupted: no marker yet
    monkeypatch.setenv(ENV_DEST, str(tmp_path))
    with pytest.raises(MissingTestAssetsError) as caught:
        built_assets("reranker", "colbert", "pii")
    message = str(caught.value)
    assert "\n" not in message
    assert "colbert, pii" in message and "reranker" not in message.split(" are not built")[0]
    assert str(tmp_path.resolve()) in message and "python scripts/build_test_assets.py" in message
    assert isinstance(caught.value, PoolragError)
