"""The compile cache on disk: a bundle is code (torch unpickles it), so only a file this user alone
could have written is loaded; a verdict that chose a compiled path must not become a way for
whoever can write a shared cache folder to run code here (security review, finding 2)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from poolrag.compile.disk_cache import CompileKey, load_artifacts

KEY = CompileKey.for_model("m@1", "native-packed", torch.float32, torch.device("cpu"), "dynamic T")


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file where the key's bundle goes, holding bytes no torch build can load."""
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "poolrag"))
    path = KEY.path()
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(b"not a bundle")
    path.chmod(0o600)
    return path


def test_a_bundle_only_this_user_could_write_is_handed_to_torch(
    bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert load_artifacts(KEY) is False
    assert "un-pickle" in caplog.text  # torch read it (and refused these bytes)


def test_a_bundle_torch_cannot_read_is_one_line_naming_it_not_torchs_traceback(
    bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A truncated or foreign bundle (a CI cache restored in part, a hand copy): torch logs the
    traceback of its refusal; the user gets one line saying which file and that it compiles anew."""
    bundle.write_bytes(b"\x80\x04 a bundle cut short")
    with caplog.at_level(logging.WARNING):
        assert load_artifacts(KEY) is False
    assert [r.name for r in caplog.records] == ["poolrag.compile.disk_cache"]
    assert str(bundle) in caplog.text and "compiling from scratch" in caplog.text
    assert "Traceback" not in caplog.text and caplog.records[0].exc_info is None


@pytest.mark.parametrize("writable", ["file", "folder"])
def test_a_bundle_others_could_write_is_never_read(
    bundle: Path, caplog: pytest.LogCaptureFixture, writable: str
) -> None:
    (bundle if writable == "file" else bundle.parent).chmod(0o666 if writable == "file" else 0o777)
    with caplog.at_level(logging.WARNING):
        assert load_artifacts(KEY) is False
    assert "writable by others" in caplog.text and "un-pickle" not in caplog.text


def test_a_missing_bundle_is_no_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "poolrag"))
    with caplog.at_level(logging.WARNING):
        assert load_artifacts(KEY) is False
    assert caplog.text == ""
