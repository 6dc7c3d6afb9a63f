"""Pooling methods: choose or combine the rows of each packed sequence.

They work on :class:`PackedStates`, so left or right padding upstream makes no difference.
``skip`` (``[B]``, or ``None`` for none) names each sequence's leading rows that were attended to
but are left out of the pool: an instruction prompt, with the special tokens before it, under a
sentence-transformers Pooling module's ``include_prompt: false`` (INSTRUCTOR). The methods follow
that module's formulas (6.2), its packed (flash-attention) path where its padded one differs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

import torch

from poolrag.config.pooler_config import PoolingType
from poolrag.runner.forward_output import PackedStates


class PoolingMethod(ABC):
    @abstractmethod
    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        """One row per sequence: ``[B, H]``."""


class _Pooled(NamedTuple):
    """The rows a pool reads: each with its sequence, its position in it, and each sequence's count."""

    states: torch.Tensor  # [N, H]
    segment: torch.Tensor  # [N]
    position: torch.Tensor | None  # [N], from 0 at the sequence's first token (a skipped prompt's too)
    counts: torch.Tensor  # [B]


def _pooled_rows(packed: PackedStates, skip: torch.Tensor | None, positions: bool = False) -> _Pooled:
    lengths = packed.lengths
    segment = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
    if skip is None and not positions:
        return _Pooled(packed.states, segment, None, lengths)
    position = torch.arange(len(segment), device=lengths.device) - packed.offsets[segment]
    if skip is None:
        return _Pooled(packed.states, segment, position, lengths)
    keep = position >= skip[segment]
    return _Pooled(packed.states[keep], segment[keep], position[keep], (lengths - skip).clamp(min=0))


def _sums(rows: _Pooled, size: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Per-sequence sums of the rows (times ``weights``), accumulated in fp32 like sentence-transformers."""
    states = rows.states.float() if weights is None else rows.states.float() * weights[:, None]
    sums = torch.zeros((size, states.shape[-1]), dtype=torch.float32, device=states.device)
    return sums.index_add_(0, rows.segment, states)


class CLSPool(PoolingMethod):
    """First token ([CLS] / <s>): what BERT-style embedders were trained with; with a skipped
    prompt, the text's first token (sentence-transformers': the first row its mask keeps)."""

    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        first = packed.offsets
        if skip is not None:
            first = first + torch.where(packed.lengths > skip, skip, 0)
        return packed.states[first]


class LastPool(PoolingMethod):
    """Last real token: the only one a causal decoder has let see the whole text (never a prompt's)."""

    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        return packed.states[packed.offsets + packed.lengths - 1]


class MeanPool(PoolingMethod):
    """Average over the tokens of each sequence, accumulated in fp32 like sentence-transformers."""

    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        rows = _pooled_rows(packed, skip)
        sums = _sums(rows, len(packed.lengths))
        return (sums / rows.counts[:, None].clamp(min=1).float()).to(packed.states.dtype)


class MeanSqrtLenPool(PoolingMethod):
    """Sum over the tokens divided by the square root of their count (sentence-transformers'
    ``mean_sqrt_len_tokens``): a longer text gets a longer vector."""

    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        rows = _pooled_rows(packed, skip)
        sums = _sums(rows, len(packed.lengths))
        return (sums / rows.counts[:, None].clamp(min=1).float().sqrt()).to(packed.states.dtype)


class WeightedMeanPool(PoolingMethod):
    """Mean weighted by position, 1 for the first token to n for the last (SGPT's
    ``weightedmean``): a causal decoder's later tokens have seen more of the text. A skipped
    prompt keeps the text's tokens at the weights of their positions."""

    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        rows = _pooled_rows(packed, skip, positions=True)
        assert rows.position is not None
        weights = (rows.position + 1).float()
        sums = _sums(rows, len(packed.lengths), weights)
        total = torch.zeros(len(packed.lengths), dtype=torch.float32, device=weights.device)
        total.index_add_(0, rows.segment, weights)
        return (sums / total[:, None].clamp(min=1)).to(packed.states.dtype)


class MaxPool(PoolingMethod):
    """Largest value per dimension over the tokens of each sequence (sentence-transformers' ``max``)."""

    def __call__(self, packed: PackedStates, skip: torch.Tensor | None = None) -> torch.Tensor:
        rows = _pooled_rows(packed, skip)
        out = torch.full(
            (len(packed.lengths), rows.states.shape[-1]),
            -torch.inf,
            dtype=rows.states.dtype,
            device=rows.states.device,
        )
        return out.index_reduce_(0, rows.segment, rows.states, "amax")


#: every pooling method by its ``pooling_type``: the types an embedder accepts (one row per text), read
#: by ``core``; sentence-transformers' spellings of those it has are ``SENTENCE_POOLING``'s
POOLING_METHODS: dict[PoolingType, type[PoolingMethod]] = {
    "CLS": CLSPool,
    "LAST": LastPool,
    "MEAN": MeanPool,
    "MAX": MaxPool,
    "WEIGHTEDMEAN": WeightedMeanPool,
    "MEAN_SQRT_LEN": MeanSqrtLenPool,
}


def pooling_method(kind: PoolingType) -> PoolingMethod:
    return POOLING_METHODS[kind]()
