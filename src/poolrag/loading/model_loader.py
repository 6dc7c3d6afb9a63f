"""Build the transformers module (and projection layers) a model kind needs."""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file
from torch import nn
from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from poolrag.config.model_kind import ModelKind
from poolrag.config.model_spec import DenseSpec, ModelSpec
from poolrag.errors import ModelLoadError
from poolrag.loading.placement import Placement

if TYPE_CHECKING:  # importing it loads transformers' whole modelling stack (seconds)
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

_AUTO_CLASSES = {
    ModelKind.EMBEDDING: AutoModel,
    ModelKind.COLBERT: AutoModel,
    ModelKind.SEQUENCE_CLASSIFIER: AutoModelForSequenceClassification,
    ModelKind.TOKEN_CLASSIFIER: AutoModelForTokenClassification,
}


def load_transformer(
    spec: ModelSpec,
    kind: ModelKind,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement | None = None,
) -> PreTrainedModel:
    placement = placement or Placement()
    model = from_pretrained(_AUTO_CLASSES[kind], spec, dtype, device, trust_remote_code, placement)
    return model.eval() if placement.places_itself else model.to(device).eval()


def from_pretrained(
    auto_class: type,
    spec: ModelSpec,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
    **extra: object,
) -> object:
    """``auto_class.from_pretrained`` with poolrag's errors: what to pass when it cannot load or fit."""
    try:
        return auto_class.from_pretrained(  # type: ignore[attr-defined]
            spec.transformer_path,
            config=spec.hf_config,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            **placement.from_pretrained_kwargs(device),
            **extra,
        )
    except ValueError as exc:
        hint = "" if trust_remote_code else " (if the model ships its own code, pass trust_remote_code=True)"
        raise ModelLoadError(
            f"cannot load {spec.architecture} from {spec.transformer_path}: {exc}{hint}"
        ) from exc
    except torch.OutOfMemoryError as exc:
        raise ModelLoadError(
            f"{spec.architecture} does not fit on {device}: pass device_map='auto' or quantization='int8'"
        ) from exc


def _activation(path: str) -> nn.Module:
    module_name, _, cls_name = path.rpartition(".")
    if not module_name.startswith("torch.nn"):
        raise ModelLoadError(f"projection activation {path!r} is not a torch.nn module")
    return getattr(importlib.import_module(module_name), cls_name)()


def load_projection(layers: list[DenseSpec], dtype: torch.dtype, device: torch.device) -> nn.Module | None:
    """Stack the Dense / ColBERT linear layers into one module, or ``None`` when there are none."""
    if not layers:
        return None
    modules: list[nn.Module] = []
    for layer in layers:
        linear = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias)
        if layer.weights_file is None or not layer.weights_file.is_file():
            raise ModelLoadError(f"projection weights missing in {layer.folder}")
        if layer.weights_file.suffix == ".safetensors":
            state = load_file(str(layer.weights_file))
        else:
            state = torch.load(layer.weights_file, map_location="cpu", weights_only=True)
        prefix = layer.weight_key_prefix
        weights = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        try:
            linear.load_state_dict(weights)
        except RuntimeError as exc:
            raise ModelLoadError(f"projection weights in {layer.folder} do not fit: {exc}") from exc
        modules.append(linear)
        act = _activation(layer.activation)
        if not isinstance(act, nn.Identity):
            modules.append(act)
    projection = nn.Sequential(*modules).to(device=device, dtype=dtype).eval()
    # inference only: frozen weights let heads run on inference-mode tensors from the forward pass
    return projection.requires_grad_(False)
