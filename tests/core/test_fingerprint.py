"""The weights identity that caches and collections key on: it must tell checkpoints apart by what
they hold, not by their shapes, and stay the same for the same files wherever they lie."""

from __future__ import annotations

import shutil
from pathlib import Path

from tiny_models import build_encoder

from poolrag.config.model_spec import load_model_spec
from poolrag.core.model_setup import fingerprint


def _fingerprint(folder: Path) -> str:
    return fingerprint(load_model_spec(folder, None, False, None))


def test_same_architecture_other_weights_is_another_identity(tmp_path: Path, minilm_path: Path) -> None:
    first = build_encoder(tmp_path / "a", "bert", minilm_path, seed=0)
    second = build_encoder(tmp_path / "b", "bert", minilm_path, seed=1)
    assert _fingerprint(first) != _fingerprint(second)


def test_the_same_files_elsewhere_are_the_same_identity(tmp_path: Path, minilm_path: Path) -> None:
    folder = build_encoder(tmp_path / "a", "bert", minilm_path, seed=0)
    copy = Path(shutil.copytree(folder, tmp_path / "copy"))
    assert _fingerprint(folder) == _fingerprint(copy)


def test_one_changed_weight_byte_is_seen_in_a_sampled_window(tmp_path: Path, minilm_path: Path) -> None:
    folder = build_encoder(tmp_path / "a", "bert", minilm_path, seed=0)
    before = _fingerprint(folder)
    weights = next(folder.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # the tail is always read
    weights.write_bytes(bytes(data))
    assert _fingerprint(folder) != before
