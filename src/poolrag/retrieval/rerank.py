"""Cross-encoder reranking: the last, most expensive and most precise stage of retrieval."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.params import PoolingParams


class CrossEncoderReranker:
    """Scores (query, passage) pairs jointly with a cross-encoder engine; higher is more relevant."""

    def __init__(self, engine: Any) -> None:
        if engine.score_kind != "cross-encoder":
            raise InvalidInputError(f"{engine.model_name} is not a cross-encoder; --rerank needs one")
        self.engine = engine

    def scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        # Long passages are cut to the model's limit rather than failing the whole search.
        outputs = self.engine.score(query, list(passages), PoolingParams(truncate_prompt_tokens=-1))
        return np.asarray([o.outputs.score for o in outputs], dtype=np.float32)
