"""A language model's head restricted to a few vocabulary rows.

LLM rerankers (Qwen3-Reranker, bge-reranker-v2-gemma, mxbai-rerank-v2) answer "yes"/"no" at
the last token; their score needs two logits, not the 150k of a full vocabulary. Keeping only
those rows of ``lm_head`` turns a [B, V] product into a [B, 2] one and frees the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from poolrag.errors import ModelLoadError
from poolrag.tokenization.tokenizer_lock import call_tokenizer

logger = logging.getLogger(__name__)


def vocab_ids(tokenizer: object, entries: Sequence[str | int]) -> tuple[int, ...]:
    """Token ids of ``entries``: a vocabulary entry (``"yes"``), text that is one token, or an id."""
    ids: list[int] = []
    for entry in entries:
        if isinstance(entry, int) and not isinstance(entry, bool):
            ids.append(entry)
            continue
        token_id = tokenizer.convert_tokens_to_ids(entry)  # type: ignore[attr-defined]
        unk = getattr(tokenizer, "unk_token_id", None)
        if token_id is None or (unk is not None and token_id == unk):
            pieces = call_tokenizer(tokenizer, entry, add_special_tokens=False)["input_ids"]
            if len(pieces) != 1:
                raise ModelLoadError(
                    f"classifier token {entry!r} is not a single token of this tokenizer (got {pieces})"
                )
            token_id = pieces[0]
        ids.append(int(token_id))
    return tuple(ids)


def softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Gemma-2 style final-logit soft-capping (``cap * tanh(x / cap)``), as the LM head applies it."""
    if not cap:
        return logits
    return torch.tanh(logits / cap) * cap


class LMHeadRowsHead(nn.Module):
    """Logits of the chosen tokens at pooled positions, from their lm_head rows only.

    Two rows ``(negative, positive)`` give one relevance logit ``l_pos - l_neg``: its sigmoid is
    exactly ``softmax([l_neg, l_pos])[1]``, the Qwen3-Reranker p(yes). One row gives that token's
    logit (bge-reranker-v2-gemma). More rows give one logit per token, for a softmax classifier.
    """

    def __init__(self, rows: torch.Tensor, token_ids: tuple[int, ...], final_softcap: float | None = None):
        super().__init__()
        if rows.dim() != 2 or rows.shape[0] != len(token_ids) or not token_ids:
            raise ModelLoadError("lm_head rows must be [num_tokens, hidden] for at least one token")
        self.register_buffer("rows", rows.detach().clone(), persistent=False)
        self.token_ids = token_ids
        self.final_softcap = final_softcap

    @classmethod
    def from_vocab(
        cls, weight: torch.Tensor, token_ids: tuple[int, ...], final_softcap: float | None = None
    ) -> LMHeadRowsHead:
        if weight.device.type == "meta":
            raise ModelLoadError("the lm_head was offloaded; give the device room for it or drop device_map")
        vocab = weight.shape[0]
        bad = [t for t in token_ids if not 0 <= t < vocab]
        if bad:
            raise ModelLoadError(f"classifier token ids {bad} are outside the model's vocabulary of {vocab}")
        return cls(weight[list(token_ids)], token_ids, final_softcap)

    @property
    def num_labels(self) -> int:
        return 1 if len(self.token_ids) <= 2 else len(self.token_ids)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        rows = self.rows.to(device=pooled.device, dtype=pooled.dtype)
        logits = softcap(F.linear(pooled, rows), self.final_softcap).float()
        if logits.shape[-1] == 2:
            return logits[:, 1:] - logits[:, :1]
        return logits
