"""Turn chunk texts into what a collection stores: one vector per chunk, or token vectors (ColBERT)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from poolrag.cache.embedder import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.params import PoolingParams


class ChunkEncoder(Protocol):
    layout: str  # "dense" | "multivector"
    dimension: int  # stored vector size
    full_dimension: int
    model_identity: str
    model_name: str
    computed: int  # texts that went through the model (cache misses)

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]: ...


class DenseEncoder:
    """Single vectors through the embedding cache, cut to the collection's Matryoshka size."""

    layout = "dense"

    def __init__(self, embedder: CachedEmbedder, dimensions: int | None = None) -> None:
        from poolrag.cache.matryoshka import check_dimensions

        check_dimensions(embedder.engine, dimensions)
        self.embedder = embedder
        self.full_dimension = embedder.full_dimension
        self.dimension = dimensions or self.full_dimension
        self.dimensions = dimensions
        self.model_identity = embedder.model_identity
        self.model_name = str(embedder.engine.model_name)

    @property
    def computed(self) -> int:
        return self.embedder.misses

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        return list(self.embedder.embed_documents(list(texts), dimensions=self.dimensions))


class ColbertEncoder:
    """ColBERT document token vectors (``[T, D]`` per chunk); not cached, they are large."""

    layout = "multivector"

    def __init__(self, engine: Any) -> None:
        if engine.score_kind != "maxsim":
            raise InvalidInputError(f"{engine.model_name} is not a ColBERT (late-interaction) model")
        self.engine = engine
        self.dimension = self.full_dimension = int(engine.embedding_dim)
        self.model_identity = str(engine.model_identity)
        self.model_name = str(engine.model_name)
        self.computed = 0

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        outputs = self.engine.encode(
            list(texts), pooling_task="token_embed", pooling_params=PoolingParams(input_type="document")
        )
        self.computed += len(outputs)
        return [np.asarray(o.outputs.data, dtype=np.float32) for o in outputs]
