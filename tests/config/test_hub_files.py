"""A hub id downloads what the model loads, read from the repo's file list: its weights whatever
their format (``.bin`` where a repo has no safetensors, BGE-M3's ``.pt`` heads), the module folders
``modules.json`` names, and never the ONNX / OpenVINO exports many repos carry next to them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from poolrag.config.model_card import declared_languages
from poolrag.testing.fake_hub import FakeHub
from poolrag.testing.tiny_models import build_bge_m3, build_encoder, write_sentence_transformers

TEXTS = ["a cat sat on the mat", "stock markets fell sharply today"]

#: a child process loading hub ids from the fake hub, printing what it resolved and embedded
_CHILD = """
import json, sys
from poolrag import Engine
from poolrag.config.resolve import resolve_model_path
repo, texts = sys.argv[1], json.loads(sys.argv[2])
folder = resolve_model_path(repo)
outputs = Engine(repo, tune="off").embed(texts) if texts else []
vectors = [list(map(float, o.outputs.embedding)) for o in outputs]
print(json.dumps({"folder": str(folder), "vectors": vectors}))
"""


def _bin_only(folder: Path) -> Path:
    """``folder``'s safetensors as sentence-transformers 2.x saved them: a sharded
    ``pytorch_model-*.bin`` with its index at the root, ``pytorch_model.bin`` in the Dense module."""
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    keys = sorted(state)
    shards = {"pytorch_model-00001-of-00002.bin": keys[::2], "pytorch_model-00002-of-00002.bin": keys[1::2]}
    for name, names in shards.items():
        torch.save({k: state[k] for k in names}, folder / name)
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
        "weight_map": {k: name for name, names in shards.items() for k in names},
    }
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    dense = folder / "2_Dense"
    torch.save(load_file(dense / "model.safetensors"), dense / "pytorch_model.bin")
    (dense / "model.safetensors").unlink()
    return folder


def _with_exports(folder: Path) -> Path:
    """The export folders popular repos carry (several model variants each, hundreds of MB there)."""
    for export, names in {
        "onnx": ("model.onnx", "model_qint8_avx512.onnx", "config.json"),
        "openvino": ("openvino_model.bin", "openvino_model.xml"),
    }.items():
        (folder / export).mkdir()
        for name in names:
            (folder / export / name).write_bytes(os.urandom(4096))
    return folder


def _load(hub_url: str, cache: Path, repo: str, texts: list[str], offline: bool = False) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env |= {"HF_ENDPOINT": hub_url, "HF_HUB_CACHE": str(cache), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, repo, json.dumps(texts)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hub-repos")
    st = build_encoder(root / "st-bin", "bert", minilm_path)
    write_sentence_transformers(st, pooling="mean", dense_out=16, normalize=True)
    m3 = build_bge_m3(root / "bge-m3", minilm_path)
    (m3 / "README.md").write_text("---\nlanguage:\n- en\n- de\nlicense: mit\n---\n# a model card\n")
    return {"org/st-bin": _with_exports(_bin_only(st)), "org/bge-m3": _with_exports(m3)}


def test_a_bin_only_repo_loads_as_sentence_transformers_loads_it_and_no_export_is_fetched(
    repos: dict[str, Path], tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = repos["org/st-bin"]
    hub = FakeHub(repos)
    with hub as url:
        got = _load(url, tmp_path / "cache", "org/st-bin", TEXTS)
        again = _load(url, tmp_path / "cache", "org/st-bin", TEXTS, offline=True)  # the warm cache, offline
    unreachable = _load(url, tmp_path / "cache", "org/st-bin", TEXTS)  # the hub gone: the warm cache
    want = SentenceTransformer(str(folder), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(np.asarray(got["vectors"]), want, atol=1e-5)
    assert again == got == unreachable
    fetched = {path for _, path in hub.fetched}
    assert {
        "pytorch_model-00001-of-00002.bin",
        "2_Dense/pytorch_model.bin",
        "1_Pooling/config.json",
    } <= fetched
    assert not [p for p in fetched if p.startswith(("onnx/", "openvino/"))], sorted(fetched)
    snapshot = Path(str(got["folder"]))
    assert not (snapshot / "onnx").exists() and not (snapshot / "openvino").exists()


def test_bge_m3s_heads_are_fetched_with_its_safetensors(repos: dict[str, Path], tmp_path: Path) -> None:
    hub = FakeHub(repos)
    with hub as url:
        got = _load(url, tmp_path / "cache", "org/bge-m3", [])
    snapshot = Path(str(got["folder"]))
    assert {"model.safetensors", "sparse_linear.pt", "colbert_linear.pt"} <= {
        p.name for p in snapshot.iterdir()
    }
    assert not [p for _, p in hub.fetched if p.startswith(("onnx/", "openvino/"))]
    # the model card comes too: the hybrid default reads the languages it declares (a hub model had none)
    assert declared_languages(snapshot) == ("de", "en")
    shutil.rmtree(tmp_path / "cache")


def test_the_files_chosen_from_all_minilm_l6_v2s_listing() -> None:
    """sentence-transformers/all-MiniLM-L6-v2's files on the hub: the same weights in five formats,
    ONNX and OpenVINO variants; a model loads the root safetensors and the Pooling module."""
    from poolrag.config.hub_files import model_files

    listing = [
        ".gitattributes", "1_Pooling/config.json", "README.md", "config.json",
        "config_sentence_transformers.json", "data_config.json", "model.safetensors", "modules.json",
        "onnx/model.onnx", "onnx/model_O1.onnx", "onnx/model_qint8_avx512.onnx",
        "openvino/openvino_model.bin", "openvino/openvino_model.xml", "pytorch_model.bin", "rust_model.ot",
        "sentence_bert_config.json", "special_tokens_map.json", "tf_model.h5", "tokenizer.json",
        "tokenizer_config.json", "train_script.py", "vocab.txt",
    ]  # fmt: skip
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    assert model_files(listing, modules) == [
        "1_Pooling/config.json", "README.md", "config.json", "config_sentence_transformers.json",
        "data_config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "train_script.py", "vocab.txt",
    ]  # fmt: skip
    # without modules.json no subfolder is the model's; .bin where a folder has no safetensors
    assert model_files(["config.json", "pytorch_model.bin", "1_Pooling/config.json", "onnx/model.onnx"]) == [
        "config.json",
        "pytorch_model.bin",
    ]
