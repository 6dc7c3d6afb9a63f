"""Split a checkpoint into the backbone that runs and the head that poolrag applies.

The backbone (``model.model`` / ``model.transformer``) returns hidden states; the head is
applied after pooling, to one row per sequence (classifiers, converted rerankers) or to the
step-tag rows (process reward models). The full ``lm_head`` of a ``*ForCausalLM`` is never run.
A bidirectional Llama (``spec.bidirectional``) is split the same way, its causal mask lifted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
from torch import nn
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from poolrag.config.model_spec import ModelSpec
from poolrag.errors import ModelLoadError
from poolrag.loading.model_loader import from_pretrained, inference_ready
from poolrag.loading.placement import Placement
from poolrag.models.llama_bidirectional import make_bidirectional

if TYPE_CHECKING:  # importing it loads transformers' whole modelling stack (seconds)
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

#: the head kept beside the backbone: the checkpoint's sequence or token head (``score``,
#: ``v_head``, ...), or its ``lm_head`` weight (rows of which a converted model scores with)
DecoderHead = Literal["sequence", "token", "lm_head"]


@dataclass(slots=True)
class DecoderParts:
    backbone: PreTrainedModel
    score: nn.Module | None = None  # the checkpoint's own head (classifier / reward model)
    output_embeddings: torch.Tensor | None = None  # lm_head weight [vocab, hidden] (maybe tied)
    final_softcap: float | None = None


def is_causal(spec: ModelSpec) -> bool:
    return spec.architecture.endswith(("ForCausalLM", "LMHeadModel"))


def _remote_code(spec: ModelSpec) -> dict[str, str]:
    """The folder's own classes, unless poolrag runs the family on transformers' layers."""
    return {} if spec.bidirectional else getattr(spec.hf_config, "auto_map", None) or {}


def _auto_class(spec: ModelSpec, head: DecoderHead) -> type:
    if head == "lm_head":
        return AutoModelForCausalLM
    head_class = AutoModelForSequenceClassification if head == "sequence" else AutoModelForTokenClassification
    remote = set(_remote_code(spec).keys())
    if not remote or head_class.__name__ in remote:
        return head_class
    if "AutoModel" in remote:  # Qwen2-Math-RM style: the reward class is registered as AutoModel
        return AutoModel
    raise ModelLoadError(
        f"{spec.architecture}: its remote code registers no class poolrag can load ({remote})"
    )


# Where published checkpoints keep the head that sits on the backbone's hidden states:
# transformers' classifiers (`score`), InternLM2 / TRL value heads (`v_head`), encoder-style and
# remote classifiers (`classifier`), GPT-2 double heads (`summary`), other remote reward models.
HEAD_NAMES = ("score", "v_head", "classifier", "summary", "reward_head", "value_head")


def find_head(model: nn.Module, architecture: str) -> nn.Module:
    """The checkpoint's own head, found by the names published models use for it.

    Frozen, because the poolers apply it to inference-mode tensors after the forward pass, and a
    head that wanted gradients would try to save them for backward.
    """
    for name in HEAD_NAMES:
        head = getattr(model, name, None)
        if isinstance(head, nn.Module) and head is not getattr(model, "base_model", None):
            logger.debug("%s: head found at `%s`", architecture, name)
            return head.eval().requires_grad_(False)
    raise ModelLoadError(
        f"{architecture} has no head poolrag recognises (looked for {', '.join(HEAD_NAMES)}); "
        "decoder classifiers are read as backbone + head"
    )


def load_decoder(
    spec: ModelSpec,
    head: DecoderHead,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    placement: Placement,
) -> DecoderParts:
    auto_class = _auto_class(spec, head)
    remote = _remote_code(spec)
    if auto_class.__name__ in remote and not trust_remote_code:
        raise ModelLoadError(
            f"{spec.architecture} ships its own modeling code ({remote[auto_class.__name__]}); "
            "pass trust_remote_code=True after reviewing it"
        )
    model = inference_ready(
        from_pretrained(auto_class, spec, dtype, device, trust_remote_code, placement), device, placement
    )
    backbone = model.base_model
    if backbone is model:
        raise ModelLoadError(f"{spec.architecture} exposes no backbone (base_model_prefix) to pool")
    if spec.bidirectional:
        backbone = make_bidirectional(backbone)
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
        parts.score = find_head(model, spec.architecture)
    logger.info("loaded %s as backbone %s + its %s head", spec.architecture, type(backbone).__name__, head)
    return parts
