"""NVIDIA's bidirectional Llama (llama-nemoretriever embedders, llama-nemotron rerankers) without remote code.

The published models are transformers' Llama layers with the causal mask removed, pooled over the
tokens (``pooling``: "avg", "cls" or "last"; "avg" in the published configs) by the shared pooling
methods, plus a linear ``score`` that rerankers apply to the pooled row, as a decoder classifier's
head is. transformers runs a Llama without its causal mask when ``config.is_causal`` is false
(a bidirectional padding mask) and every attention module's ``is_causal`` is false (what SDPA
falls back to when no mask is needed), so the layers are reused as they are. ``temperature`` in
the configs scales the training loss only and is not read here.
"""

from __future__ import annotations

import logging

from torch import nn

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
