"""Pooling methods: choose or combine the rows of each packed sequence.

They work on :class:`PackedStates`, so left or right padding upstream makes no difference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from poolrag.config.pooler_config import PoolingType
from poolrag.runner.forward_output import PackedStates


class PoolingMethod(ABC):
    @abstractmethod
    def __call__(self, packed: PackedStates) -> torch.Tensor:
        """One row per sequence: ``[B, H]``."""


class CLSPool(PoolingMethod):
    """First token ([CLS] / <s>): what BERT-style embedders were trained with."""

    def __call__(self, packed: PackedStates) -> torch.Tensor:
        return packed.states[packed.offsets]


class LastPool(PoolingMethod):
    """Last real token: the only one a causal decoder has let see the whole text."""

    def __call__(self, packed: PackedStates) -> torch.Tensor:
        return packed.states[packed.offsets + packed.lengths - 1]


class MeanPool(PoolingMethod):
    """Average over the tokens of each sequence, accumulated in fp32 like sentence-transformers."""

    def __call__(self, packed: PackedStates) -> torch.Tensor:
        lengths = packed.lengths
        segment = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
        sums = torch.zeros(
            (len(lengths), packed.states.shape[-1]), dtype=torch.float32, device=lengths.device
        )
        sums.index_add_(0, segment, packed.states.float())
        return (sums / lengths[:, None].clamp(min=1).float()).to(packed.states.dtype)


class MaxPool(PoolingMethod):
    """Largest value per dimension over the tokens of each sequence (sentence-transformers' ``max``)."""

    def __call__(self, packed: PackedStates) -> torch.Tensor:
        lengths, states = packed.lengths, packed.states
        segment = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
        out = torch.full(
            (len(lengths), states.shape[-1]), -torch.inf, dtype=states.dtype, device=states.device
        )
        return out.index_reduce_(0, segment, states, "amax")


def pooling_method(kind: PoolingType) -> PoolingMethod:
    table: dict[str, type[PoolingMethod]] = {
        "CLS": CLSPool,
        "LAST": LastPool,
        "MEAN": MeanPool,
        "MAX": MaxPool,
    }
    return table[kind]()
