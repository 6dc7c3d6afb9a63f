"""What every adapter runs on: an in-process :class:`~poolrag.Engine` or a ``poolrag serve`` URL.

Both sides answer the same four questions with the same numpy results: ``embed_array`` (``[N, D]``
float32), ``score_array`` (one float per pair), ``encode_arrays`` (one array per input, e.g. ColBERT's
``[T, D]`` token vectors) and their async twins. :class:`~poolrag.client.PoolragClient` already has
that shape; :class:`EngineBackend` gives it to an engine (plus the optional embedding cache), so an
adapter holds one object and never asks which kind it is.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from poolrag import Engine, InvalidInputError, PoolingParams
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient

logger = logging.getLogger(__name__)

BASE_URL_ENV = "POOLRAG_BASE_URL"
API_KEY_ENV = "POOLRAG_API_KEY"


@runtime_checkable
class PoolingBackend(Protocol):
    """The engine calls the adapters need, in-process or remote."""

    def embed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    async def aembed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    def score_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    async def ascore_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray: ...

    def encode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]: ...

    async def aencode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]: ...


class EngineBackend:
    """An in-process engine with the client's numpy-returning methods.

    The whole input list goes to the engine in one call: it sorts and packs inputs into forward
    passes by token budget, which beats any fixed batch size chosen here. Async calls use the
    engine's async core when it has one (batching across concurrent callers) and otherwise run the
    thread-safe sync API in a worker thread so the event loop is never blocked.

    Args:
        engine: the engine to run.
        cache: optional embedding cache for ``embed_array``: an :class:`~poolrag.cache.EmbeddingCache`
            (or its file path), read through a ``CachedEmbedder`` per truncation setting, or a
            ``CachedEmbedder`` on this same engine (which then embeds with its own pooling params).
            Unchanged texts are read from disk instead of being embedded again.
    """

    def __init__(self, engine: Engine, cache: Any | None = None) -> None:
        self.engine = engine
        self._embedder: CachedEmbedder | None = None
        self._store: EmbeddingCache | None = None
        self._embedders: dict[int | None, CachedEmbedder] = {}
        if cache is None:
            pass
        elif isinstance(cache, CachedEmbedder):
            if cache.engine is not engine:
                raise InvalidInputError("the CachedEmbedder wraps another engine than this adapter's")
            self._embedder = cache
        elif isinstance(cache, EmbeddingCache):
            self._store = cache
        elif isinstance(cache, (str, os.PathLike)):
            self._store = EmbeddingCache(cache)
        else:
            raise InvalidInputError(
                "cache must be an EmbeddingCache, a CachedEmbedder or a file path, "
                f"not {type(cache).__name__}"
            )

    def __repr__(self) -> str:
        cached = self._embedder is not None or self._store is not None
        return f"EngineBackend({self.engine.model_name!r}, cached={cached})"

    def cached_embedder(self, params: PoolingParams | None) -> CachedEmbedder | None:
        """The cache-reading embedder for these parameters (``None`` without a cache)."""
        if self._embedder is not None:
            return self._embedder
        if self._store is None:
            return None
        # The cache key covers truncation, so each truncation setting gets its own embedder.
        truncate = params.truncate_prompt_tokens if params is not None else None
        if truncate not in self._embedders:
            base = PoolingParams(truncate_prompt_tokens=truncate)
            self._embedders[truncate] = CachedEmbedder(self.engine, self._store, pooling_params=base)
        return self._embedders[truncate]

    def embed_array(self, prompts: Sequence[str], pooling_params: PoolingParams | None = None) -> np.ndarray:
        embedder = self.cached_embedder(pooling_params)
        if embedder is not None:
            return embedder.embed(list(prompts), **_cache_args(pooling_params))
        return self.engine.embed_array(list(prompts), pooling_params)

    async def aembed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        prompts = list(prompts)
        embedder = self.cached_embedder(pooling_params)
        if embedder is not None:
            return await embedder.aembed(prompts, **_cache_args(pooling_params))
        native = getattr(self.engine, "aembed_array", None)
        if native is not None:
            return await native(prompts, pooling_params)
        if hasattr(self.engine, "aembed"):
            outputs = await self.engine.aembed(prompts, pooling_params)
            return _stack([out.outputs.embedding for out in outputs], self.engine, pooling_params)
        return await asyncio.to_thread(self.engine.embed_array, prompts, pooling_params)

    def score_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        outputs = self.engine.score(text_1, list(text_2), pooling_params)
        return np.asarray([out.outputs.score for out in outputs], dtype=np.float64)

    async def ascore_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        if hasattr(self.engine, "ascore"):
            outputs = await self.engine.ascore(text_1, list(text_2), pooling_params)
            return np.asarray([out.outputs.score for out in outputs], dtype=np.float64)
        return await asyncio.to_thread(self.score_array, text_1, text_2, pooling_params)

    def encode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]:
        return [out.outputs.data for out in self.engine.encode(list(prompts), pooling_task, pooling_params)]

    async def aencode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]:
        if hasattr(self.engine, "aencode"):
            outputs = await self.engine.aencode(list(prompts), pooling_task, pooling_params)
            return [out.outputs.data for out in outputs]
        return await asyncio.to_thread(self.encode_arrays, prompts, pooling_task, pooling_params)


def _cache_args(params: PoolingParams | None) -> dict[str, Any]:
    """The per-call arguments of ``CachedEmbedder.embed``; other parameters are fixed per embedder."""
    if params is None:
        return {}
    if params.prompt is not None or params.normalize is not None or params.use_activation is not None:
        raise InvalidInputError(
            "with an embedding cache, set prompt / normalize on the CachedEmbedder itself"
        )
    return {"input_type": params.input_type, "dimensions": params.dimensions}


def _stack(vectors: list[np.ndarray], engine: Engine, params: PoolingParams | None) -> np.ndarray:
    if vectors:
        return np.stack(vectors)
    return np.zeros((0, (params.dimensions if params else None) or engine.embedding_dim or 0), np.float32)


def resolve_backend(
    *,
    engine: Engine | None = None,
    client: PoolragClient | None = None,
    model_name: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    cache: Any | None = None,
    engine_kwargs: dict[str, Any] | None = None,
) -> PoolingBackend:
    """The backend an adapter's constructor arguments describe.

    * ``engine=``: share an engine that is already loaded (the cheapest way to run several adapters).
    * ``model_name=`` alone: load that model (path or hub id) in this process, with ``engine_kwargs``.
    * ``base_url=`` (or ``$POOLRAG_BASE_URL`` when nothing else is given): call ``poolrag serve``;
      ``model_name`` is then the served model name and ``api_key`` defaults to ``$POOLRAG_API_KEY``.
    * ``client=``: share a :class:`PoolragClient`.
    * ``cache=`` a ``CachedEmbedder`` alone: run its engine, reading through its cache.
    """
    if sum(x is not None for x in (engine, client, base_url)) > 1:
        raise InvalidInputError("pass only one of engine=, client= and base_url=")
    if isinstance(cache, CachedEmbedder) and engine is client is base_url is model_name is None:
        engine = cache.engine  # the cache's own engine is the one to run
    if engine is not None:
        if model_name is not None:
            raise InvalidInputError("pass either engine= or model_name=, not both (the engine has its model)")
        if not isinstance(engine, Engine):
            raise InvalidInputError(f"engine must be a poolrag.Engine, not {type(engine).__name__}")
        return EngineBackend(engine, cache)
    if client is None and base_url is None and model_name is None:
        base_url = os.environ.get(BASE_URL_ENV)
    if client is not None or base_url is not None:
        if cache is not None:
            raise InvalidInputError(
                "the embedding cache is keyed by the in-process engine's identity; with a remote "
                "server, put the cache on the server side or pass engine= instead"
            )
        if client is not None:
            if not isinstance(client, PoolragClient):
                raise InvalidInputError(f"client must be a PoolragClient, not {type(client).__name__}")
            return client
        return PoolragClient(str(base_url), api_key, model=None if model_name is None else str(model_name))
    if model_name is None:
        raise InvalidInputError(
            f"say which model to run: engine=, model_name= (a path or hub id), base_url= or ${BASE_URL_ENV}"
        )
    logger.info("loading %s in process", model_name)
    return EngineBackend(Engine(model_name, **(engine_kwargs or {})), cache)


def backend_base_url(backend: PoolingBackend) -> str | None:
    """The server URL of a remote backend (``None`` in process), for the adapters' ``base_url`` field."""
    return backend.base_url if isinstance(backend, PoolragClient) else None
