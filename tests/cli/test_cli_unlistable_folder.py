"""A folder that cannot be listed (``chmod 000``) is one left-out line, nothing else: ingest's
"N image files not read" count took it for an image file, so a text-only folder said "1 image
file not read: this model reads text", sending the user after images that do not exist."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from poolrag.cli import main


def test_an_unlistable_folder_is_left_out_not_counted_as_an_image(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    unlistable: Callable[[Path], None],
) -> None:
    docs = tmp_path / "docs"
    (docs / "locked").mkdir(parents=True)
    (docs / "bees.txt").write_text("Honeybee foragers dance to show where flowers are.")
    (docs / "locked" / "tides.md").write_text("Spring tides come when the Sun and the Moon line up.")
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    unlistable(docs / "locked")
    code = main(["ingest", str(docs), "--uri", str(tmp_path / "m.db"), "--no-cache", "-q"])
    err = capsys.readouterr().err
    assert code == 0
    assert f"{docs / 'locked'}: cannot list the folder: Permission denied" in err
    assert "image file" not in err, err
