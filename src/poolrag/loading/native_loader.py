"""Decide whether a model runs on poolrag's own implementation, and load it from safetensors.

``model_impl="auto"`` (the default) takes the native path only where it is exact: a supported
family, GELU (erf), absolute positions, no remote code, weights in safetensors, every tensor
the module needs present. Anything else returns a reason and the caller loads through
transformers, as vLLM's ``model_impl`` does. ``"native"`` turns that reason into an error.
"""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from poolrag.config.model_spec import ModelSpec
from poolrag.config.network_head import NetworkHead
from poolrag.config.option_choices import MODEL_IMPLS, ModelImpl
from poolrag.config.registry import NATIVE_MODEL_TYPES
from poolrag.errors import ModelLoadError
from poolrag.loading.placement import Placement
from poolrag.loading.quantization import saved_quantization
from poolrag.models.bert import BertFamilyModel, convert_checkpoint

logger = logging.getLogger(__name__)


def _weight_files(folder: Path) -> list[Path]:
    """The checkpoint's files as transformers reads them: the shard index, else ``model.safetensors``."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / shard for shard in shards]
    single = folder / "model.safetensors"
    return [single] if single.is_file() else []


def unsupported_reason(spec: ModelSpec, head: NetworkHead, placement: Placement) -> str | None:
    """Why the native implementation cannot run this model exactly, or ``None`` when it can."""
    cfg = spec.hf_config
    model_type = getattr(cfg, "model_type", "")
    if model_type not in NATIVE_MODEL_TYPES:
        return f"no native implementation of {model_type!r} (native: {', '.join(NATIVE_MODEL_TYPES)})"
    if head is NetworkHead.SEQUENCE and spec.convert == "classify":
        return "token_classify (convert='classify') reads every token; the native classifier reads [CLS]"
    if getattr(cfg, "auto_map", None):
        return "the folder ships its own modelling code"
    method = saved_quantization(cfg)
    if method is not None:  # its tensors are packed values and scales, not the layers' weights
        return f"the checkpoint is saved {method}-quantized (config.json quantization_config)"
    if placement.places_itself:
        return "device_map / quantization place weights through transformers"
    if getattr(cfg, "hidden_act", None) != "gelu":
        return f"activation {getattr(cfg, 'hidden_act', None)!r} (native: exact 'gelu')"
    if getattr(cfg, "position_embedding_type", "absolute") not in (None, "absolute"):
        return f"position_embedding_type {cfg.position_embedding_type!r}"
    if getattr(cfg, "is_decoder", False) or getattr(cfg, "add_cross_attention", False):
        return "decoder / cross-attention configuration"
    if not _weight_files(spec.transformer_path):
        return "no safetensors weights"
    return None


def load_native(
    spec: ModelSpec, head: NetworkHead, dtype: torch.dtype, device: torch.device
) -> BertFamilyModel:
    """Build the module on the meta device and assign the checkpoint's tensors.

    Tensors are read one at a time and cast on the host, so peak memory is the model plus one
    tensor; heads the task does not use (an MLM head, a pooler) are never read.
    """
    with torch.device("meta"):
        model = BertFamilyModel(spec.hf_config, head)
    model_type = spec.hf_config.model_type
    raw: dict[str, torch.Tensor] = {}
    current = spec.transformer_path
    try:
        for file in _weight_files(spec.transformer_path):
            current = file
            with safe_open(str(file), framework="pt") as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    if _wanted(key):
                        raw[key] = _plain(key, handle.get_tensor(key)).to(dtype)
        current = spec.transformer_path
        state = convert_checkpoint(raw, head, model_type)
    except (OSError, ValueError, RuntimeError, SafetensorError, pickle.UnpicklingError) as exc:
        # unreadable or forged file (named: the user must know which), duplicate names
        raise ModelLoadError(f"cannot read the checkpoint {current} natively: {exc}") from exc
    del raw
    expected = set(model.state_dict())
    missing = sorted(expected - set(state))
    if missing:
        raise ModelLoadError(f"checkpoint lacks {len(missing)} tensors the model needs, e.g. {missing[:3]}")
    try:
        model.load_state_dict({name: state.pop(name).to(device) for name in expected}, assign=True)
    except (RuntimeError, torch.OutOfMemoryError) as exc:  # shapes that disagree with the config
        raise ModelLoadError(f"checkpoint does not fit its config or {device}: {exc}") from exc
    return model.eval().requires_grad_(False)


#: the dtypes a weight is stored in unquantized: cast to the run's dtype, they are the weights
_PLAIN_FLOATS = frozenset({torch.float32, torch.float16, torch.bfloat16, torch.float64})


def _plain(key: str, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, refused where a layer's weight or bias is stored in another dtype (int8, float8,
    packed ints): a quantized checkpoint whose scales live in other tensors, which a plain cast
    would turn into wrong weights, every output silently off."""
    if key.endswith((".weight", ".bias")) and tensor.dtype not in _PLAIN_FLOATS:
        raise ModelLoadError(f"{key} is stored as {tensor.dtype} (quantized), not as a weight")
    return tensor


def _wanted(key: str) -> bool:
    """Skip what no pooling task reads: masked-LM / pre-training heads."""
    return not key.startswith(("cls.", "lm_head.")) and ".lm_head." not in key


def try_load_native(
    spec: ModelSpec,
    head: NetworkHead,
    dtype: torch.dtype,
    device: torch.device,
    placement: Placement,
    model_impl: ModelImpl,
) -> BertFamilyModel | None:
    """The native module, or ``None`` when transformers should load the model (``"auto"`` only)."""
    if model_impl not in MODEL_IMPLS:
        raise ModelLoadError(f"unknown model_impl {model_impl!r}; use one of {', '.join(MODEL_IMPLS)}")
    if model_impl == "transformers":
        return None
    reason = unsupported_reason(spec, head, placement)
    if reason is None:
        try:
            return load_native(spec, head, dtype, device)
        except ModelLoadError as exc:
            reason = str(exc)
    if model_impl == "native":
        raise ModelLoadError(f"model_impl='native' cannot run {spec.architecture}: {reason}")
    logger.info("running %s through transformers: %s", spec.architecture, reason)
    return None
