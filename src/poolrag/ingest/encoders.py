"""Turn chunk texts into what a collection stores: one vector per chunk, or token vectors (ColBERT)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.cache.embedder import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.model_facts import ScoreKind
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
        facts = embedder.facts
        PoolingParams(dimensions=dimensions).verify("embed", facts)
        self.embedder = embedder
        self.full_dimension = embedder.full_dimension
        self.dimension = dimensions or self.full_dimension
        self.dimensions = dimensions
        self.model_identity = facts.model_identity
        self.model_name = facts.model_name

    @property
    def computed(self) -> int:
        return self.embedder.misses

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        return list(self.embedder.embed_documents(list(texts), dimensions=self.dimensions))


class ColbertEncoder:
    """ColBERT document token vectors (``[T, D]`` per chunk); not cached, they are large."""

    layout = "multivector"

    def __init__(self, backend: PoolingBackend) -> None:
        facts = backend.facts
        if facts.score_kind is not ScoreKind.MAXSIM:
            raise InvalidInputError(f"{facts.model_name} is not a ColBERT (late-interaction) model")
        self.backend = backend
        self.dimension = self.full_dimension = int(facts.embedding_dim or 0)
        self.model_identity = facts.model_identity
        self.model_name = facts.model_name
        self.computed = 0

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        arrays = self.backend.encode_arrays(list(texts), "token_embed", PoolingParams(input_type="document"))
        self.computed += len(arrays)
        return [np.asarray(a, dtype=np.float32) for a in arrays]
