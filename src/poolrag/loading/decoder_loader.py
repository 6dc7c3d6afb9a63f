"""Split a decoder checkpoint into the backbone that runs and the head that poolrag applies.

The backbone (``model.model`` / ``model.transformer``) returns hidden states; the head is
applied after pooling, to one row per sequence (classifiers, converted rerankers) or to the
step-tag rows (process reward models). The full ``lm_head`` of a ``*ForCausalLM`` is never run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from poolrag.config.model_kind import ModelKind
from poolrag.config.model_spec import ModelSpec
from poolrag.errors import ModelLoadError
from poolrag.loading.model_loader import from_pretrained
from poolrag.loading.placement import Placement

if TYPE_CHECKING:  # importing it loads transformers' whole modelling stack (seconds)
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

DECODER_KINDS = frozenset({ModelKind.DECODER_CLASSIFIER, ModelKind.LM_HEAD_CLASSIFIER, ModelKind.STEP_REWARD})


@dataclass(slots=True)
class DecoderParts:
    backbone: PreTrainedModel
    score: nn.Module | None = None  # the checkpoint's own head (classifier / reward model)
    output_embeddings: torch.Tensor | None = None  # lm_head weight [vocab, hidden] (maybe tied)
    final_softcap: float | None = None


def _is_causal(spec: ModelSpec) -> bool:
    arch = spec.architecture
    return arch.endswith("ForCausalLM") or arch.endswith("LMHeadModel")


def _auto_class(spec: ModelSpec, kind: ModelKind) -> type:
    if kind is ModelKind.LM_HEAD_CLASSIFIER or (kind is ModelKind.STEP_REWARD and _is_causal(spec)):
        return AutoModelForCausalLM
    head_class = (
        AutoModelForSequenceClassification
        if kind is ModelKind.DECODER_CLASSIFIER
        else AutoModelForTokenClassification
    )
    remote = set((getattr(spec.hf_config, "auto_map", None) or {}).keys())
    if not remote or head_class.__name__ in remote:
        return head_class
    if "AutoModel" in remote:  # Qwen2-Math-RM style: the reward class is registered as AutoModel
        return AutoModel
    raise ModelLoadError(
        f"{spec.architecture}: its remote code registers no class poolrag can load ({remote})"
    )


def load_decoder(
    spec: ModelSpec,
    kind: ModelKind,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
) -> DecoderParts:
    auto_class = _auto_class(spec, kind)
    remote = getattr(spec.hf_config, "auto_map", None) or {}
    if auto_class.__name__ in remote and not trust_remote_code:
        raise ModelLoadError(
            f"{spec.architecture} ships its own modeling code ({remote[auto_class.__name__]}); "
            "pass trust_remote_code=True after reviewing it"
        )
    model = from_pretrained(
        auto_class, spec, dtype, device, trust_remote_code, placement, output_loading_info=True
    )
    model, info = model
    missing = sorted(info.get("missing_keys") or [])
    if missing:  # a head transformers would initialise at random: scores would be noise
        raise ModelLoadError(
            f"{spec.transformer_path} has no weights for {', '.join(missing[:4])}"
            f"{' ...' if len(missing) > 4 else ''}; as {auto_class.__name__} they would start at random"
        )
    if not placement.places_itself:
        model = model.to(device)
    model.eval()
    backbone = model.base_model
    if backbone is model:
        raise ModelLoadError(f"{spec.architecture} exposes no backbone (base_model_prefix) to pool")
    text_config = spec.hf_config.get_text_config()
    parts = DecoderParts(
        backbone=backbone, final_softcap=getattr(text_config, "final_logit_softcapping", None)
    )
    if auto_class is AutoModelForCausalLM:
        output = model.get_output_embeddings()
        if output is None or not isinstance(getattr(output, "weight", None), torch.Tensor):
            raise ModelLoadError(f"{spec.architecture} has no lm_head to convert")
        if getattr(output, "bias", None) is not None:
            raise ModelLoadError(
                f"{spec.architecture}: an lm_head with a bias is not supported for conversion"
            )
        parts.output_embeddings = output.weight.detach()
        for key in ("logit_scale", "logits_scaling"):  # Cohere / Granite rescale logits: not handled
            if getattr(text_config, key, None) not in (None, 1, 1.0):
                raise ModelLoadError(
                    f"{spec.architecture} rescales its logits ({key}); conversion would be wrong"
                )
    else:
        score = getattr(model, "score", None)
        if not isinstance(score, nn.Module):
            raise ModelLoadError(
                f"{spec.architecture} has no `score` head; decoder classifiers are read as backbone + score"
            )
        parts.score = score.eval()
    logger.info("loaded %s as backbone %s + %s", spec.architecture, type(backbone).__name__, kind.value)
    return parts
