"""Model folders as users have them, loaded through transformers: weight files in every layout
transformers reads give the reference's vectors, and a checkpoint that lacks weights the model
runs is refused (transformers would start them at random, a different model on every load)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from poolrag import Engine, ModelLoadError
from poolrag.testing.tiny_models import SENTENCES, write_sentence_transformers


@pytest.fixture(scope="module")
def st_folder(tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentence-transformers folder (mean pooling, normalised) on a tiny BERT."""
    folder = tmp_path_factory.mktemp("st") / "model"
    shutil.copytree(tiny_model("bert"), folder)
    return write_sentence_transformers(folder, pooling="mean", normalize=True)


def _with_weights(source: Path, dest: Path, state: dict[str, torch.Tensor], as_bin: bool) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("model.safetensors"))
    if as_bin:
        torch.save(state, dest / "pytorch_model.bin")
    else:
        save_file(state, str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


def test_a_pytorch_bin_without_the_unused_pooler_matches_sentence_transformers(
    st_folder: Path, tmp_path: Path
) -> None:
    """Hidden-state kinds never run the pooler, so its absence is no missing weight."""
    from sentence_transformers import SentenceTransformer

    state = {k: v for k, v in load_file(str(st_folder / "model.safetensors")).items() if "pooler" not in k}
    folder = _with_weights(st_folder, tmp_path / "bin", state, as_bin=True)
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    with Engine(folder, tune="off") as engine:
        np.testing.assert_allclose(engine.embed_array(SENTENCES), reference, atol=1e-6)


@pytest.mark.parametrize("as_bin", [False, True], ids=["safetensors", "bin"])
@pytest.mark.parametrize("model_impl", ["auto", "transformers"])
def test_a_checkpoint_without_a_layers_weights_is_refused(
    st_folder: Path, tmp_path: Path, as_bin: bool, model_impl: str
) -> None:
    state = load_file(str(st_folder / "model.safetensors"))
    kept = {k: v for k, v in state.items() if "layer.1.attention.self.query" not in k}
    folder = _with_weights(st_folder, tmp_path / "partial", kept, as_bin)
    with pytest.raises(ModelLoadError, match=r"no weights for encoder\.layer\.1\.attention\.self\.query"):
        Engine(folder, model_impl=model_impl, tune="off")  # type: ignore[arg-type]


def test_a_classifier_config_on_base_weights_is_refused(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """A base checkpoint whose config names a classifier (a reranker made by editing config.json):
    its classifier would be random, so every score would be noise."""
    folder = tmp_path / "headless"
    shutil.copytree(tiny_model("bert"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps(config | {"architectures": ["BertForSequenceClassification"]})
    )
    for model_impl in ("auto", "transformers"):
        with pytest.raises(ModelLoadError, match=r"no weights for classifier\.bias, classifier\.weight"):
            Engine(folder, model_impl=model_impl, tune="off")  # type: ignore[arg-type]


@pytest.mark.parametrize("model_impl", ["auto", "transformers"])
def test_a_torch_compiled_modules_state_dict_is_refused_with_the_reason(
    st_folder: Path, tmp_path: Path, model_impl: str
) -> None:
    """A checkpoint written from ``torch.compile(model).state_dict()`` names every tensor
    ``_orig_mod.*``: no weight under the model's own names (sentence-transformers runs it at random)."""
    from transformers import AutoModel

    compiled = torch.compile(AutoModel.from_pretrained(st_folder))
    state = {name: tensor.contiguous() for name, tensor in compiled.state_dict().items()}
    assert all(name.startswith("_orig_mod.") for name in state)
    folder = _with_weights(st_folder, tmp_path / "compiled", state, as_bin=False)
    with pytest.raises(ModelLoadError, match=r"named _orig_mod\.\*.*model\._orig_mod\.save_pretrained"):
        Engine(folder, model_impl=model_impl, tune="off")  # type: ignore[arg-type]
