"""One pooler per task: the dispatcher that joins a pooling method to a head."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from poolrag.pooling.heads import ClassifierHead, MatryoshkaHead, TokenClassifierHead, TokenEmbeddingHead
from poolrag.pooling.methods import PoolingMethod
from poolrag.request import PoolingRequest
from poolrag.runner.forward_output import ForwardOutput


class TaskPooler(Protocol):
    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]: ...


class EmbeddingPooler:
    def __init__(self, method: PoolingMethod, head: MatryoshkaHead) -> None:
        self.method = method
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        assert output.tokens is not None
        return self.head(self.method(output.tokens), requests)


class TokenEmbeddingPooler:
    def __init__(self, head: TokenEmbeddingHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        return self.head(tokens.states, tokens.token_ids, tokens.lengths.tolist(), requests)


class SequenceClassificationPooler:
    """The model's own head already pooled; only the activation remains."""

    def __init__(self, head: ClassifierHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        assert output.sequences is not None
        return self.head(output.sequences, requests)


class TokenClassificationPooler:
    def __init__(self, head: TokenClassifierHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        tokens = output.tokens
        assert tokens is not None
        return self.head(tokens.states, tokens.token_ids, tokens.lengths.tolist(), requests)


class ProjectedEmbeddingPooler:
    """The network pooled and projected already (a dual encoder's text or image vector); only
    Matryoshka truncation and normalisation remain."""

    def __init__(self, head: MatryoshkaHead) -> None:
        self.head = head

    def __call__(self, output: ForwardOutput, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        assert output.sequences is not None
        return self.head(output.sequences, requests)
