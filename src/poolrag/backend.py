"""The one interface every consumer of a pooling model depends on.

:class:`~poolrag.Engine` (in process) and :class:`~poolrag.client.PoolragClient` (``poolrag serve``
over HTTP) both implement it, and so does the cache's read-through wrapper; the cache, ingestion,
retrieval and the framework adapters take a :class:`PoolingBackend` and nothing more specific. Every
method returns numpy arrays, so results cross no per-item Python objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from poolrag.model_facts import ModelFacts
from poolrag.params import PoolingParams


@runtime_checkable
class PoolingBackend(Protocol):
    """Embed, score and token-embed, sync and async, plus the facts of the model behind them."""

    @property
    def facts(self) -> ModelFacts:
        """The model's dimension, Matryoshka sizes, identity, tasks and score kind."""
        ...

    def embed_array(self, prompts: Sequence[str], pooling_params: PoolingParams | None = None) -> np.ndarray:
        """``[N, D]`` float32 vectors, one row per prompt."""
        ...

    async def aembed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    def score_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """One float64 relevance score of each ``text_2`` item to the query ``text_1``."""
        ...

    async def ascore_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    def encode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]:
        """One array per prompt (e.g. ColBERT's ``[T, D]`` token vectors for ``token_embed``; for
        ``sparse_embed`` a record array of :data:`~poolrag.outputs.SPARSE_ENTRY`, token id and weight)."""
        ...

    async def aencode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]: ...
