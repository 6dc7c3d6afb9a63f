"""One pooler per task: the dispatcher that joins a pooling method to a head."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import torch

from poolrag.pooling.heads import ClassifierHead, MatryoshkaHead
from poolrag.pooling.methods import PoolingMethod
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput


class TaskPooler(Protocol):
    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]: ...


#: a per-token head: (token states, token ids, each sequence's length, requests) → one array each
TokenRowsHead = Callable[[torch.Tensor, torch.Tensor, list[int], Sequence[PoolingRequest]], list[np.ndarray]]


class EmbeddingPooler:
    def __init__(self, method: PoolingMethod, head: MatryoshkaHead) -> None:
        self.method = method
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        return self.head(self.method(tokens, prompt_rows(requests, tokens.lengths.device)), requests)


def prompt_rows(requests: Sequence[PoolingRequest], device: torch.device) -> torch.Tensor | None:
    """Each request's prompt rows that the pool leaves out (``PoolingRequest.prompt_length``), or
    ``None`` where no request has any (the pool then reads every row)."""
    if not any(r.prompt_length for r in requests):
        return None
    return torch.tensor([r.prompt_length for r in requests], dtype=torch.int64, device=device)


class TokenRowsPooler:
    """Every token row of each sequence → a per-token head: ColBERT vectors (:class:`TokenEmbeddingHead`),
    or :class:`TokenClassifierHead`'s rows (token classification, or a PRM's step rewards)."""

    def __init__(self, head: TokenRowsHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        return self.head(tokens.states, tokens.token_ids, tokens.lengths.tolist(), requests)


class SequenceRowsPooler:
    """The network pooled already (a classifier's own head, a dual encoder's projected text or
    image vector); only the head remains: the activation, or Matryoshka truncation and normalisation."""

    def __init__(self, head: ClassifierHead | MatryoshkaHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        assert output.sequences is not None
        return self.head(output.sequences, requests)
