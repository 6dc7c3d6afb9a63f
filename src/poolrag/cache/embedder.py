"""``CachedEmbedder``: an engine behind the embedding cache, the one door every caller embeds through.

Ingestion, retrieval and the framework adapters all embed through this class, so a text embedded
once (by any of them, in any process sharing the cache file) is never embedded again. It always
asks the engine for full-size vectors and cuts them down to the requested Matryoshka size, so one
cache entry serves every size.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from poolrag.cache.keys import cache_namespace, text_key
from poolrag.cache.matryoshka import check_dimensions, truncate
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.errors import InputTypeError
from poolrag.params import PoolingParams
from poolrag.tokenization.input_processor import check_text

logger = logging.getLogger(__name__)


class CachedEmbedder:
    """Embed texts with an :class:`~poolrag.Engine`, reusing vectors from an :class:`EmbeddingCache`.

    Args:
        engine: an engine whose model supports ``embed``.
        cache: where vectors persist; ``None`` computes every time (the counters still work).
        pooling_params: per-call options applied to every text (``input_type`` and ``dimensions``
            are set per call by the methods below).
        batch_size: texts per engine call on cache misses; the engine packs each call by tokens.
    """

    def __init__(
        self,
        engine: Any,
        cache: EmbeddingCache | None = None,
        *,
        pooling_params: PoolingParams | None = None,
        batch_size: int = 256,
    ) -> None:
        if "embed" not in engine.supported_tasks:
            raise ValueError(f"{engine.model_name} cannot embed (tasks: {', '.join(engine.supported_tasks)})")
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.engine = engine
        self.cache = cache
        self.batch_size = batch_size
        base = pooling_params or PoolingParams()
        # Ask for the full size explicitly when the engine's defaults would truncate.
        full = engine.embedding_dim if engine.pooler_config.dimensions is not None else None
        self._base = base.with_updates(dimensions=full)
        self.normalize = (
            base.normalize if base.normalize is not None else bool(engine.pooler_config.normalize)
        )
        self._namespaces: dict[str | None, bytes] = {}
        self.hits = 0
        self.misses = 0

    @property
    def full_dimension(self) -> int:
        """Size of the vectors the cache holds (the model's full embedding size)."""
        return int(self.engine.embedding_dim)

    @property
    def model_identity(self) -> str:
        return str(self.engine.model_identity)

    def _params(self, input_type: str | None) -> PoolingParams:
        return self._base.with_updates(input_type=input_type)

    def _keys(self, texts: Sequence[str], input_type: str | None) -> list[bytes]:
        if input_type not in self._namespaces:
            self._namespaces[input_type] = cache_namespace(self.engine, "embed", self._params(input_type))
        namespace = self._namespaces[input_type]
        return [text_key(namespace, t) for t in texts]

    @staticmethod
    def _check_texts(texts: Sequence[str]) -> list[str]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InputTypeError(f"texts must be a list of strings, not {type(texts).__name__}")
        return [check_text(t) for t in texts]

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found = self.cache.get_many(keys) if self.cache is not None else {}
        return {k: v for k, v in found.items() if v.shape[0] == self.full_dimension}

    def _missing(
        self, texts: list[str], keys: list[bytes], found: dict[bytes, np.ndarray]
    ) -> dict[bytes, str]:
        return {k: t for k, t in zip(keys, texts, strict=True) if k not in found}

    def _store(self, computed: dict[bytes, np.ndarray]) -> None:
        if self.cache is not None and computed:
            self.cache.put_many(computed)

    def _assemble(
        self,
        keys: list[bytes],
        found: dict[bytes, np.ndarray],
        computed: dict[bytes, np.ndarray],
        dims: int | None,
    ) -> np.ndarray:
        self.misses += len(computed)
        self.hits += len(keys) - sum(1 for k in dict.fromkeys(keys) if k in computed)
        if not keys:
            return np.zeros((0, dims or self.full_dimension), dtype=np.float32)
        merged = {**found, **computed}
        full = np.stack([merged[k] for k in keys]).astype(np.float32, copy=False)
        return truncate(full, dims, self.normalize)

    # -- sync ---------------------------------------------------------------------------------------
    def embed(
        self, texts: Sequence[str], *, input_type: str | None = None, dimensions: int | None = None
    ) -> np.ndarray:
        """``[N, dimensions or full]`` float32 vectors; only texts missing from the cache hit the model."""
        items = self._check_texts(texts)
        check_dimensions(self.engine, dimensions)
        keys = self._keys(items, input_type)
        found = self._lookup(keys)
        missing = self._missing(items, keys, found)
        computed: dict[bytes, np.ndarray] = {}
        todo = list(missing.items())
        params = self._params(input_type)
        for start in range(0, len(todo), self.batch_size):
            part = todo[start : start + self.batch_size]
            vectors = self.engine.embed_array([t for _, t in part], params)
            batch = {k: vectors[i] for i, (k, _) in enumerate(part)}
            self._store(batch)  # per batch, so a crash keeps what was already paid for
            computed.update(batch)
        return self._assemble(keys, found, computed, dimensions)

    def embed_documents(self, texts: Sequence[str], dimensions: int | None = None) -> np.ndarray:
        return self.embed(texts, input_type="document", dimensions=dimensions)

    def embed_query(self, text: str, dimensions: int | None = None) -> np.ndarray:
        if not isinstance(text, str):
            raise InputTypeError(f"query must be a string, not {type(text).__name__}")
        return self.embed([text], input_type="query", dimensions=dimensions)[0]

    # -- async --------------------------------------------------------------------------------------
    async def aembed(
        self, texts: Sequence[str], *, input_type: str | None = None, dimensions: int | None = None
    ) -> np.ndarray:
        """Like :meth:`embed`; uses the engine's async core when it has one, else a worker thread."""
        if not hasattr(self.engine, "aembed"):
            return await asyncio.to_thread(self.embed, texts, input_type=input_type, dimensions=dimensions)
        items = self._check_texts(texts)
        check_dimensions(self.engine, dimensions)
        keys = self._keys(items, input_type)
        found = await asyncio.to_thread(self._lookup, keys)
        missing = self._missing(items, keys, found)
        computed: dict[bytes, np.ndarray] = {}
        if missing:
            params = self._params(input_type)
            if hasattr(self.engine, "aembed_array"):
                vectors = list(await self.engine.aembed_array(list(missing.values()), params))
            else:
                outputs = await self.engine.aembed(list(missing.values()), params)
                vectors = [o.outputs.embedding for o in outputs]
            computed = {k: np.asarray(v, dtype=np.float32) for k, v in zip(missing, vectors, strict=True)}
            await asyncio.to_thread(self._store, computed)
        return self._assemble(keys, found, computed, dimensions)

    async def aembed_documents(self, texts: Sequence[str], dimensions: int | None = None) -> np.ndarray:
        return await self.aembed(texts, input_type="document", dimensions=dimensions)

    async def aembed_query(self, text: str, dimensions: int | None = None) -> np.ndarray:
        if not isinstance(text, str):
            raise InputTypeError(f"query must be a string, not {type(text).__name__}")
        return (await self.aembed([text], input_type="query", dimensions=dimensions))[0]
