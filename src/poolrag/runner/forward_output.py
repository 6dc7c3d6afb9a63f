"""What a forward pass hands to the poolers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(slots=True)
class PackedStates:
    """Per-token rows of every sequence, padding removed, concatenated in batch order.

    Packed form makes pooling independent of padding side: sequence ``i`` owns rows
    ``offsets[i] : offsets[i] + lengths[i]``.
    """

    states: torch.Tensor  # [total_tokens, H]
    lengths: torch.Tensor  # [B] int64, on the states' device
    token_ids: torch.Tensor  # [total_tokens] int64

    @property
    def offsets(self) -> torch.Tensor:
        return torch.cumsum(self.lengths, 0) - self.lengths


@dataclass(slots=True)
class ForwardOutput:
    """Per-token rows (hidden states or token logits), one row per sequence (logits), or both (a
    sequence classifier that also serves ``token_classify``)."""

    tokens: PackedStates | None = None
    sequences: torch.Tensor | None = None  # [B, num_labels]

    @staticmethod
    def concat(parts: Sequence[ForwardOutput]) -> ForwardOutput:
        """Join the outputs of consecutive sub-batches (a batch split after running out of memory)."""
        sequences = [p.sequences for p in parts if p.sequences is not None]
        tokens = [p.tokens for p in parts if p.tokens is not None]
        return ForwardOutput(
            sequences=torch.cat(sequences) if sequences else None,
            tokens=PackedStates(
                states=torch.cat([t.states for t in tokens]),
                lengths=torch.cat([t.lengths for t in tokens]),
                token_ids=torch.cat([t.token_ids for t in tokens]),
            )
            if tokens
            else None,
        )
