"""Cross-encoder reranking: the last, most expensive and most precise stage of retrieval."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.errors import InvalidInputError
from poolrag.model_facts import ScoreKind
from poolrag.params import PoolingParams


class CrossEncoderReranker:
    """Scores (query, passage) pairs jointly with a cross-encoder backend; higher is more relevant."""

    def __init__(self, backend: PoolingBackend) -> None:
        facts = backend.facts
        if facts.score_kind is not ScoreKind.CROSS_ENCODER:
            raise InvalidInputError(
                f"{facts.model_name} is not a cross-encoder (it scores by {facts.score_kind.value}); "
                "reranking needs one"
            )
        self.backend = backend

    def scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        # Long passages are cut to the model's limit rather than failing the whole search.
        scores = self.backend.score_array(query, list(passages), PoolingParams(truncate_prompt_tokens=-1))
        return scores.astype(np.float32)
