"""BGE-M3-style models: the dense and the sparse vectors of a chunk from ONE forward pass.

:class:`SharedPassBackend` is the backend a :class:`~poolrag.cache.CachedEmbedder` wraps when the
main model also has a sparse head. Its ``embed_array`` runs ``encode_multi`` and hands the sparse
halves of document calls to the learned sparse encoder's cache, so the sparse encoder that runs
next finds them there and no second forward pass is made. Everything else goes straight to the
engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from poolrag.cache.embedder import CachedEmbedder, ForwardsToBackend
from poolrag.cache.sparse_vectors import CachedSparseVectors
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.engine import Engine
from poolrag.ingest.encoders import DenseEncoder
from poolrag.ingest.sparse_encoders import OWN_HEAD, LearnedSparseChunkEncoder
from poolrag.model_facts import ModelFacts
from poolrag.params import PoolingParams


class SharedPassBackend(ForwardsToBackend):
    """A :class:`~poolrag.backend.PoolingBackend` over ``engine`` whose document embeddings also fill
    ``sparse`` (the learned sparse encoder's :class:`CachedSparseVectors`)."""

    backend: Engine

    def __init__(self, engine: Engine, sparse: CachedSparseVectors, sparse_params: PoolingParams) -> None:
        self.backend = engine
        self.sparse = sparse
        self.sparse_params = sparse_params

    @property
    def facts(self) -> ModelFacts:
        return self.backend.facts

    def _shares(self, params: PoolingParams | None) -> bool:
        """Whether this call's sparse half is what the sparse encoder would compute."""
        given = params or PoolingParams()
        return given.input_type == self.sparse_params.input_type and given.max_active_dims is None

    def embed_array(self, prompts: Sequence[str], pooling_params: PoolingParams | None = None) -> np.ndarray:
        texts = list(prompts)
        if not texts or not self._shares(pooling_params):
            return self.backend.embed_array(texts, pooling_params)
        parts = self.backend.encode_multi(texts, pooling_params)
        self.sparse.remember(texts, [p.sparse for p in parts])
        return np.stack([np.asarray(p.dense, dtype=np.float32) for p in parts])

    async def aembed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        return await self.backend.aembed_array(prompts, pooling_params)


def has_sparse_head(engine: Engine) -> bool:
    """Whether the main model gives dense and sparse vectors from one pass (BGE-M3-style)."""
    return {"embed", "sparse_embed"} <= set(engine.supported_tasks)


def own_head_encoders(
    engine: Engine, cache: EmbeddingCache | None, dimensions: int | None = None
) -> tuple[DenseEncoder, LearnedSparseChunkEncoder]:
    """Dense and learned sparse chunk encoders of one three-head model, sharing its forward pass."""
    sparse = LearnedSparseChunkEncoder(engine, cache, source=OWN_HEAD)
    backend = SharedPassBackend(engine, sparse.documents, sparse.document_params)
    return DenseEncoder(CachedEmbedder(backend, cache), dimensions), sparse
