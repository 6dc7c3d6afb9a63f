"""Folders that hold a model in a form poolrag does not run say what they are and what to do, in
one line: a PEFT adapter (alone, as a sentence-transformers module, or beside its base weights)
and an ONNX / OpenVINO export without PyTorch weights. An export beside the safetensors changes
nothing: the safetensors run."""

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


def _lora_adapter(base: Path, dest: Path) -> Path:
    """A LoRA adapter of ``base`` on its attention's query and value, as peft's
    ``PeftModel.save_pretrained`` writes it (the adapter config naming the base model, the low-rank
    matrices under ``base_model.model.``); no config.json, no base weights."""
    dest.mkdir(parents=True, exist_ok=True)
    state = load_file(str(base / "model.safetensors"))
    generator = torch.Generator().manual_seed(3)
    lora: dict[str, torch.Tensor] = {}
    for key, weight in state.items():
        if key.endswith(("query.weight", "value.weight")):
            stem = "base_model.model." + key.removesuffix(".weight")
            lora[f"{stem}.lora_A.weight"] = torch.randn(4, weight.shape[1], generator=generator)
            lora[f"{stem}.lora_B.weight"] = torch.randn(weight.shape[0], 4, generator=generator)
    save_file(lora, str(dest / "adapter_model.safetensors"), metadata={"format": "pt"})
    settings = {
        "peft_type": "LORA",
        "base_model_name_or_path": "org/tiny-base",
        "auto_mapping": {"base_model_class": "BertModel", "parent_library": "transformers.models.bert"},
        "r": 4,
        "lora_alpha": 8,
        "target_modules": ["query", "value"],
        "inference_mode": True,
    }
    (dest / "adapter_config.json").write_text(json.dumps(settings))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (base / name).is_file():
            shutil.copy(base / name, dest / name)
    return dest


def _one_line_refusal(folder: Path, pattern: str) -> str:
    with pytest.raises(ModelLoadError, match=pattern) as caught:
        Engine(folder, device="cpu", tune="off")
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_an_adapter_folder_names_its_base_model_and_how_to_merge_it(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """transformers' own error was "Unrecognized model ... should have a model_type key in its
    config.json", which says nothing of adapters."""
    folder = _lora_adapter(tiny_model("bert"), tmp_path / "adapter")
    message = _one_line_refusal(folder, r"holds a LORA adapter \(adapter_config\.json\) of 'org/tiny-base'")
    assert "PeftModel.from_pretrained(AutoModel.from_pretrained('org/tiny-base')" in message
    assert "merge_and_unload()" in message


def test_a_sentence_transformers_folder_whose_transformer_is_an_adapter_is_refused(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """sentence-transformers saves a model with an adapter as its modules plus the adapter files."""
    folder = tmp_path / "st-adapter"
    shutil.copytree(tiny_model("bert"), folder)
    write_sentence_transformers(folder)
    for name in ("config.json", "model.safetensors"):
        (folder / name).unlink()
    _lora_adapter(tiny_model("bert"), folder)
    message = _one_line_refusal(folder, "holds a LORA adapter")
    assert "model.transformers_model.merge_and_unload()" in message


def test_an_adapter_beside_its_base_weights_is_refused_not_ignored(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """Without peft, transformers loads the base weights and leaves the adapter out: the base
    model's vectors under the adapted model's name (sentence-transformers refuses it without peft).
    A folder of weights merged already, with the adapter's files left over, is told to drop them."""
    folder = tmp_path / "embedded"
    shutil.copytree(tiny_model("bert"), folder)
    _lora_adapter(tiny_model("bert"), folder)
    _one_line_refusal(folder, r"beside full weights, which would run without it \(merged into them already\?")


def test_an_adapter_config_left_beside_merged_weights_without_the_adapter_runs_the_weights(
    tiny_model: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A repo merged and uploaded again often keeps adapter_config.json and not the adapter's
    weights: there is nothing to apply, and a hub user cannot delete the file from the cache."""
    plain = tiny_model("bert")
    folder = tmp_path / "merged"
    shutil.copytree(plain, folder)
    _lora_adapter(plain, folder)
    (folder / "adapter_model.safetensors").unlink()
    with (
        caplog.at_level("WARNING", logger="poolrag.config.weight_formats"),
        Engine(folder, device="cpu", tune="off") as leftover,
        Engine(plain, device="cpu", tune="off") as base,
    ):
        np.testing.assert_array_equal(leftover.embed_array(SENTENCES), base.embed_array(SENTENCES))
    assert "adapter_config.json but no adapter weights" in caplog.text


@pytest.fixture(scope="module")
def exported(tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentence-transformers folder with its ONNX export in ``onnx/``, the layout
    sentence-transformers' ``export_*`` functions and many hub repos have."""
    import transformers

    folder = tmp_path_factory.mktemp("exported") / "model"
    shutil.copytree(tiny_model("bert"), folder)
    write_sentence_transformers(folder, normalize=True)
    (folder / "onnx").mkdir()
    model = transformers.AutoModel.from_pretrained(folder).eval()
    ids = torch.tensor([[101, 7592, 102]])
    torch.onnx.export(
        _HiddenStates(model),
        (ids, torch.ones_like(ids)),
        str(folder / "onnx" / "model.onnx"),
        input_names=["input_ids", "attention_mask"],
        output_names=["token_embeddings"],
        dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}},
        dynamo=False,
    )
    return folder


class _HiddenStates(torch.nn.Module):
    """The last hidden states alone: what a sentence-transformers ONNX export computes."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


@pytest.mark.parametrize("model_impl", ["auto", "transformers"])
def test_safetensors_beside_an_onnx_export_run_as_without_it(
    exported: Path, tmp_path: Path, model_impl: str
) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(exported, plain, ignore=shutil.ignore_patterns("onnx"))
    with Engine(exported, model_impl=model_impl, tune="off") as engine:  # type: ignore[arg-type]
        vectors = engine.embed_array(SENTENCES)
    with Engine(plain, model_impl=model_impl, tune="off") as engine:  # type: ignore[arg-type]
        np.testing.assert_array_equal(vectors, engine.embed_array(SENTENCES))


@pytest.mark.parametrize("layout", ["onnx/", "fastembed"])
def test_an_export_without_pytorch_weights_is_refused_by_name(
    exported: Path, tmp_path: Path, layout: str
) -> None:
    """transformers' own error ("no file named model.safetensors") was an OSError, not a
    ModelLoadError, and did not say what the folder holds instead."""
    folder = tmp_path / "export-only"
    shutil.copytree(exported, folder, ignore=shutil.ignore_patterns("*.safetensors", "onnx"))
    exports = {
        "onnx/": ["onnx/model.onnx"],
        "fastembed": ["model_optimized.onnx"],  # fastembed's repos: the export at the root
    }[layout]
    for name in exports:
        (folder / name).parent.mkdir(exist_ok=True)
        shutil.copy(exported / "onnx" / "model.onnx", folder / name)
    _one_line_refusal(folder, rf"holds no PyTorch weights .*only an ONNX/OpenVINO export \({exports[0]}\)")
