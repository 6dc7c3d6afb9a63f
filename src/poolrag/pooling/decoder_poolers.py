"""Task poolers for models whose head runs here, after pooling, not inside the model.

transformers' decoder classifiers find "the last token" by searching for ``pad_token_id``; that
misreads a text that ends in EOS when EOS doubles as padding. Pooling the packed hidden states
(padding already removed) and then applying the head reads the true last token whatever the
padding, and runs the head on one row per sequence instead of every position.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from poolrag.pooling.heads import ClassifierHead, TokenClassifierHead, on_device_of
from poolrag.pooling.methods import PoolingMethod
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput


class PooledScorePooler:
    """Pooling method (a decoder's LAST token, a bidirectional model's mean) → ``score`` module
    (a classifier's linear or a few lm_head rows) → activation."""

    def __init__(self, method: PoolingMethod, score: nn.Module, head: ClassifierHead) -> None:
        self.method = method
        self.score = score
        self.head = head

    @torch.inference_mode()  # the states come from inference mode: the head may not track gradients
    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        assert output.tokens is not None
        pooled = on_device_of(self.score, self.method(output.tokens))
        return self.head(self.score(pooled), requests)


class TokenScorePooler:
    """Every token row → ``score`` module → per-token head: a decoder classifier's
    ``token_classify`` (as vLLM's classify models do) and its per-token rewards (``ALL`` pooling),
    and an encoder classifier's ``token_classify`` with ``convert='classify'`` (its own head
    layers, see ``loading.token_classify_heads``). The head runs here, so no second model is loaded."""

    def __init__(self, score: nn.Module, head: TokenClassifierHead) -> None:
        self.score = score
        self.head = head

    @torch.inference_mode()
    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        states = on_device_of(self.score, tokens.states)
        return self.head(self.score(states), tokens.token_ids, tokens.lengths.tolist(), requests)
