"""The weights identity that caches and collections key on: it must tell checkpoints apart by what
they hold, not by their shapes, and stay the same for the same files wherever they lie."""

from __future__ import annotations

import shutil
from pathlib import Path

from poolrag import Engine
from poolrag.config.model_spec import load_model_spec
from poolrag.core.model_setup import fingerprints
from poolrag.testing.tiny_models import build_encoder


def _fingerprint(folder: Path) -> str:
    return fingerprints(load_model_spec(folder, None, False, None))[0]


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


def _swap_vocabulary_lines(folder: Path, first: str, second: str) -> None:
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    i, j = lines.index(first), lines.index(second)
    lines[i], lines[j] = lines[j], lines[i]
    (folder / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_vocabulary_without_tokenizer_json_is_in_the_identity(tmp_path: Path, minilm_path: Path) -> None:
    # with no tokenizer.json, transformers builds the tokenizer from vocab.txt: another vocabulary
    # is other token ids, so other vectors, and neither a cache nor a collection may take it for the old
    folder = build_encoder(tmp_path / "a", "bert", minilm_path, seed=0)
    (folder / "tokenizer.json").unlink()
    before = _fingerprint(folder)
    _swap_vocabulary_lines(folder, "hello", "cat")
    assert _fingerprint(folder) != before
    engine = Engine(folder)
    assert engine.facts.model_identity.endswith(_fingerprint(folder))


def test_a_folder_with_tokenizer_json_keeps_the_identity_it_had(tmp_path: Path, minilm_path: Path) -> None:
    # the fast tokenizer is built from tokenizer.json alone: vocab.txt and friends beside it are not
    # read, and hashing them would make every existing collection refuse its own model
    folder = build_encoder(tmp_path / "a", "bert", minilm_path, seed=0)
    assert (folder / "tokenizer.json").is_file() and (folder / "vocab.txt").is_file()
    (folder / "spiece.model").write_bytes(b"unused")
    bare = Path(shutil.copytree(folder, tmp_path / "bare"))
    for name in ("vocab.txt", "spiece.model"):
        (bare / name).unlink()  # what the fingerprint read before non-JSON tokenizer files counted
    assert _fingerprint(folder) == _fingerprint(bare)
    _swap_vocabulary_lines(folder, "hello", "cat")
    assert _fingerprint(folder) == _fingerprint(bare)
