"""NVIDIA's bidirectional Llama (llama-nemoretriever embedders, llama-nemotron rerankers) without remote code.

The published models are transformers' Llama layers with the causal mask removed, pooled over the
tokens (``pooling``: "avg", "cls" or "last"; "avg" in the published configs), plus a linear
``score`` for the rerankers. transformers runs a Llama without its causal mask when
``config.is_causal`` is false (a bidirectional padding mask) and every attention module's
``is_causal`` is false (what SDPA falls back to when no mask is needed), so the layers are reused
as they are. ``temperature`` in the configs scales the training loss only and is not read here.
"""

from __future__ import annotations

import logging

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from poolrag.config.pooler_config import PoolingType
from poolrag.errors import ModelLoadError

logger = logging.getLogger(__name__)


def make_bidirectional(model: nn.Module) -> nn.Module:
    """Remove the causal mask from a transformers decoder, in place."""
    model.config.is_causal = False
    model.config.use_cache = False  # one forward per batch: a KV cache is pure waste
    switched = 0
    for module in model.modules():
        if getattr(module, "is_causal", None) is True:
            module.is_causal = False
            switched += 1
    if switched == 0:
        raise ModelLoadError(
            f"{type(model).__name__} has no attention module whose causal flag can be lifted"
        )
    logger.debug("bidirectional attention in %d modules of %s", switched, type(model).__name__)
    return model


class BidirectionalSequenceClassifier(nn.Module):
    """Bidirectional backbone → pooled row (mean over real tokens by default) → ``score``.

    Returns the ``logits`` field the runner reads from transformers' classifiers, one row per
    sequence, whatever side the batch was padded on.
    """

    def __init__(self, backbone: nn.Module, score: nn.Module, pooling: PoolingType) -> None:
        super().__init__()
        self.backbone = make_bidirectional(backbone)
        self.score = score
        self.pooling = pooling
        self.config = backbone.config

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> SequenceClassifierOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
        ).last_hidden_state
        mask = attention_mask.to(hidden.dtype).unsqueeze(-1)
        if self.pooling == "MEAN":
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        else:
            rows = torch.arange(hidden.shape[0], device=hidden.device)
            real = attention_mask.bool()
            first = real.int().argmax(1)
            last = hidden.shape[1] - 1 - real.flip(1).int().argmax(1)
            pooled = hidden[rows, first if self.pooling == "CLS" else last]
        return SequenceClassifierOutput(logits=self.score(pooled))

    def transformers_parts(self) -> list[nn.Module]:
        """The parts that are transformers' own code: the runner may pack their CPU weights."""
        return [self.backbone]
