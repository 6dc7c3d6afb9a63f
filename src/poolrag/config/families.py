"""What a model folder needs beyond transformers' own config for families vLLM runs natively.

Read once, by :func:`poolrag.config.model_spec.load_model_spec`: the config of a folder whose
``model_type`` only its own code defines (with a message naming ``trust_remote_code`` when that
code is the only way in), NVIDIA's bidirectional Llama without its remote code, and ColBERT
checkpoints selected by architecture name whose projection sits in the main checkpoint.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import AutoConfig, PretrainedConfig

from poolrag.config.pooler_config import PoolingType
from poolrag.config.positions import usable_positions
from poolrag.config.registry import BIDIRECTIONAL_ARCHITECTURES, BIDIRECTIONAL_POOLING
from poolrag.errors import ModelLoadError

if TYPE_CHECKING:
    from poolrag.config.model_spec import ColbertSpec, DenseSpec

logger = logging.getLogger(__name__)

BIDIRECTIONAL_MODEL_TYPE = "llama_bidirec"  # what NVIDIA's remote code registers its config as
# the names ColBERT checkpoints give their projection (Stanford / PyLate / vLLM's loaders)
COLBERT_PROJECTIONS = ("linear", "colbert_linear")
# vLLM's ColBERT input_type handling: the first marker the tokenizer knows (Jina, PyLate, Stanford),
# queries cut to and padded with [MASK] to 32 tokens, all of them attended
COLBERT_MARKERS = {
    "query": ("[QueryMarker]", "[Q]", "[unused0]"),
    "document": ("[DocumentMarker]", "[D]", "[unused1]"),
}
COLBERT_QUERY_LENGTH = 32


def _raw_config(folder: Path) -> dict[str, Any]:
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return raw if isinstance(raw, dict) else {}


def read_hf_config(folder: Path, trust_remote_code: bool) -> PretrainedConfig:
    """``AutoConfig`` for ``folder``, with the fix when only the folder's own code can read it."""
    raw = _raw_config(folder)
    auto_map = raw.get("auto_map") or {}
    architecture = (raw.get("architectures") or [None])[0]
    if raw.get("model_type") == BIDIRECTIONAL_MODEL_TYPE and not (trust_remote_code and auto_map):
        # NVIDIA's config class only adds ``pooling`` / ``temperature`` to LlamaConfig
        from transformers import LlamaConfig  # here: its import costs every other model 1-2 s

        values = {k: v for k, v in raw.items() if k not in ("model_type", "auto_map", "transformers_version")}
        logger.info("%s: read as a Llama config; its layers run bidirectionally", folder)
        return LlamaConfig(**values)
    try:
        return AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except ValueError as exc:
        if auto_map and not trust_remote_code:
            raise ModelLoadError(
                f"{folder}: {architecture or raw.get('model_type')!r} (model_type "
                f"{raw.get('model_type')!r}) is defined by the code this folder's auto_map names "
                f"({auto_map.get('AutoConfig', next(iter(auto_map.values())))}), not by transformers: pass "
                "trust_remote_code=True (--trust-remote-code) after reviewing that code"
            ) from exc
        raise ModelLoadError(f"cannot read the model config at {folder}: {exc}") from exc
    except OSError as exc:
        raise ModelLoadError(f"no model config at {folder}: {exc}") from exc


def is_bidirectional(architecture: str, hf_config: PretrainedConfig, trust_remote_code: bool) -> bool:
    """A bidirectional Llama that poolrag runs on transformers' layers (a trusted remote-code
    folder runs its own forward instead)."""
    if architecture not in BIDIRECTIONAL_ARCHITECTURES:
        return False
    return not (trust_remote_code and getattr(hf_config, "auto_map", None))


def bidirectional_pooling(hf_config: PretrainedConfig) -> PoolingType:
    """The pooling a bidirectional Llama was trained with (its ``pooling`` key, "avg" when absent)."""
    name = str(getattr(hf_config, "pooling", None) or "avg").lower()
    if name not in BIDIRECTIONAL_POOLING:
        raise ModelLoadError(
            f"bidirectional Llama pooling {name!r} is not one of {', '.join(BIDIRECTIONAL_POOLING)}"
        )
    return BIDIRECTIONAL_POOLING[name]


def _checkpoint_keys(folder: Path) -> dict[str, Path]:
    """Tensor name -> safetensors file, over the single file or the shard index."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {key: folder / shard for key, shard in weight_map.items()}
    single = folder / "model.safetensors"
    if not single.is_file():
        return {}
    from safetensors import safe_open

    with safe_open(str(single), framework="pt") as handle:
        return dict.fromkeys(handle.keys(), single)


def _projection_in_checkpoint(folder: Path) -> DenseSpec | None:
    """The ColBERT projection stored with the backbone (``linear.weight``, ``colbert_linear.weight``,
    under any prefix), as vLLM's ColBERT loaders find it."""
    keys = _checkpoint_keys(folder)
    found = [k for k in keys if k.endswith(".weight") and k.rsplit(".", 2)[-2] in COLBERT_PROJECTIONS]
    if not found:
        return None
    if len(found) > 1:
        raise ModelLoadError(f"{folder}: more than one ColBERT projection in the checkpoint: {found}")
    key = found[0]
    return checkpoint_projection(folder, keys[key], key, bias=f"{key[: -len('weight')]}bias" in keys)


def checkpoint_projection(folder: Path, weights: Path, key: str, bias: bool) -> DenseSpec:
    """The projection ``key`` (``<prefix>weight``) of the checkpoint file ``weights``, stored beside
    the backbone, as a layer without activation; its sizes read from the file's header."""
    from safetensors import safe_open

    from poolrag.config.model_spec import DenseSpec

    with safe_open(str(weights), framework="pt") as handle:
        out_features, in_features = handle.get_slice(key).get_shape()
    return DenseSpec(
        folder=folder,
        in_features=int(in_features),
        out_features=int(out_features),
        bias=bias,
        activation="torch.nn.modules.linear.Identity",
        weight_key_prefix=key[: -len("weight")],
        weights_file=weights,
    )


def _known_token(folder: Path, candidates: tuple[str, ...]) -> str | None:
    """The first of ``candidates`` that is one token of the folder's tokenizer."""
    tokenizer_file = folder / "tokenizer.json"
    if tokenizer_file.is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        return next((c for c in candidates if tokenizer.token_to_id(c) is not None), None)
    vocab_file = folder / "vocab.txt"
    if vocab_file.is_file():
        vocab = set(vocab_file.read_text(encoding="utf-8").splitlines())
        return next((c for c in candidates if c in vocab), None)
    return None


def named_colbert(
    folder: Path,
    hf_config: PretrainedConfig,
    dense: list[DenseSpec],
    pylate: ColbertSpec | None,
) -> tuple[ColbertSpec, list[DenseSpec]]:
    """A ColBERT chosen by architecture name (``ColBERTModernBertModel``, ``ColBERTJinaRobertaModel``,
    ``ColBERTModel``): the projection from a Dense module or the main checkpoint; the markers and
    lengths from the folder's PyLate settings, else as vLLM encodes such models by input type."""
    from poolrag.config.model_spec import ColbertSpec

    if not dense:
        projection = _projection_in_checkpoint(folder)
        if projection is None:
            raise ModelLoadError(
                f"{folder}: a ColBERT model needs its projection (`linear.weight` or "
                "`colbert_linear.weight` in the checkpoint, or a sentence-transformers Dense module); "
                "without it the token vectors would be the backbone's, which it was not trained to match"
            )
        dense = [projection]
    if pylate is not None:
        return pylate, dense
    spec = ColbertSpec(
        query_prefix=_known_token(folder, COLBERT_MARKERS["query"]),
        document_prefix=_known_token(folder, COLBERT_MARKERS["document"]),
        query_length=COLBERT_QUERY_LENGTH,
        document_length=usable_positions(hf_config) or 512,  # 512: no position table
        attend_to_expansion_tokens=True,
        do_query_expansion=True,
        skiplist_words=(),  # no skiplist without PyLate settings: vLLM keeps every token
        own_lengths=False,
    )
    return spec, dense
