"""Load the heads that turn hidden states into sparse (token id → weight) vectors.

Both kinds run their backbone alone, like an embedder (so batches pack and the native encoders
apply), and keep the head for the pooler: SPLADE's masked-LM head, which maps each token to
vocabulary logits, and BGE-M3's ``sparse_linear`` / ``colbert_linear`` layers.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForMaskedLM

from poolrag.config.model_spec import LexicalHeadsSpec, ModelSpec
from poolrag.errors import ModelLoadError
from poolrag.loading.model_loader import from_pretrained, inference_ready, unsafe_pickle_error
from poolrag.loading.placement import Placement

logger = logging.getLogger(__name__)


class _DistilBertMLMHead(nn.Module):
    """DistilBERT spreads its MLM head over four attributes of the model; this is them in order."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.transform = model.vocab_transform
        self.activation = model.activation
        self.norm = model.vocab_layer_norm
        self.projector = model.vocab_projector

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.projector(self.norm(self.activation(self.transform(states))))


def _mlm_head(model: nn.Module, architecture: str) -> nn.Module:
    """The module mapping final hidden states to vocabulary logits, as the checkpoint's forward does."""
    if hasattr(model, "cls"):  # BERT family
        return model.cls
    if hasattr(model, "lm_head"):  # RoBERTa, XLM-RoBERTa
        return model.lm_head
    if hasattr(model, "vocab_projector"):
        return _DistilBertMLMHead(model)
    if hasattr(model, "head") and hasattr(model, "decoder"):  # ModernBERT
        return nn.Sequential(model.head, model.decoder)
    raise ModelLoadError(f"SPLADE pooling: cannot find the masked-LM head of {architecture}")


def load_masked_lm(
    spec: ModelSpec,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
) -> tuple[nn.Module, nn.Module]:
    """The backbone (returns ``last_hidden_state``) and the MLM head of a ``*ForMaskedLM`` checkpoint."""
    model = from_pretrained(AutoModelForMaskedLM, spec, dtype, device, trust_remote_code, placement)
    assert isinstance(model, nn.Module)
    model = inference_ready(model, device, placement)
    return model.base_model, _mlm_head(model, spec.architecture)


def _linear_from_state(path: Path, dtype: torch.dtype, device: torch.device) -> nn.Linear:
    """An ``nn.Linear`` from a plain ``{"weight", "bias"}`` state dict; never unpickles code."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise unsafe_pickle_error(str(path), exc) from exc
    if not isinstance(state, dict) or "weight" not in state:
        raise ModelLoadError(f"{path} is not a linear layer's state dict (no 'weight')")
    weight = state["weight"]
    if weight.ndim != 2:
        raise ModelLoadError(f"{path}: weight must be 2-D, got shape {tuple(weight.shape)}")
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias="bias" in state)
    try:
        linear.load_state_dict(state)
    except RuntimeError as exc:
        raise ModelLoadError(f"{path} does not fit a linear layer: {exc}") from exc
    return linear.to(device=device, dtype=dtype).eval().requires_grad_(False)


def load_lexical_heads(
    heads: LexicalHeadsSpec, hidden_size: int, dtype: torch.dtype, device: torch.device
) -> tuple[nn.Linear, nn.Linear]:
    """BGE-M3's ``sparse_linear`` ([H→1]) and ``colbert_linear`` ([H→D]), checked against the backbone."""
    sparse = _linear_from_state(heads.sparse_linear, dtype, device)
    colbert = _linear_from_state(heads.colbert_linear, dtype, device)
    if sparse.out_features != 1:
        raise ModelLoadError(f"{heads.sparse_linear}: expected one output weight per token")
    for path, layer in ((heads.sparse_linear, sparse), (heads.colbert_linear, colbert)):
        if layer.in_features != hidden_size:
            raise ModelLoadError(
                f"{path} takes {layer.in_features} features; the backbone's hidden size is {hidden_size}"
            )
    return sparse, colbert
