"""Which :class:`~poolrag.backend.PoolingBackend` an adapter's constructor arguments name.

Every adapter class of both frameworks takes the same arguments to say where its model runs, and
this module is the one place that turns them into a backend and refuses contradictory ones; the
adapters then hold one object and never ask which kind it is.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from poolrag.backend import PoolingBackend
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.engine import Engine
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.params import PoolingParams

logger = logging.getLogger(__name__)

BASE_URL_ENV = "POOLRAG_BASE_URL"
API_KEY_ENV = "POOLRAG_API_KEY"


def resolve_backend(
    *,
    engine: Engine | None = None,
    client: PoolragClient | None = None,
    model_name: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    cache: CachedEmbedder | EmbeddingCache | str | os.PathLike[str] | None = None,
    engine_kwargs: dict[str, Any] | None = None,
    truncate_prompt_tokens: int | None = -1,
    engine_args: EngineArgs | None = None,
) -> PoolingBackend:
    """The backend these arguments describe.

    * ``engine=``: share an engine that is already loaded (the cheapest way to run several adapters).
    * ``model_name=`` alone: load that model (path or hub id) in this process, with ``engine_kwargs``
      (checked by :class:`~poolrag.EngineArgs`: an unknown key is one line naming it); or
      ``engine_args=``, an :class:`~poolrag.EngineArgs` naming the model and its options.
    * ``base_url=`` (or ``$POOLRAG_BASE_URL`` when nothing else is given): call ``poolrag serve``;
      ``model_name`` is then the served model name and ``api_key`` defaults to ``$POOLRAG_API_KEY``.
    * ``client=``: share a :class:`PoolragClient`.
    * ``cache=``: an :class:`EmbeddingCache` (or its path) read through before the engine embeds, keyed
      with ``truncate_prompt_tokens``; or a :class:`CachedEmbedder` used as it is (alone, it also says
      which engine runs).
    """
    if sum(x is not None for x in (engine, client, base_url)) > 1:
        raise InvalidInputError("pass only one of engine=, client= and base_url=")
    if engine_args is not None:
        model_name = _model_of(engine_args, model_name, engine, client, base_url, engine_kwargs)
    # a CachedEmbedder alone already wraps the engine to run
    cache_only = isinstance(cache, CachedEmbedder) and engine is client is base_url is model_name is None
    if not cache_only and engine is client is base_url is model_name is None:
        base_url = os.environ.get(BASE_URL_ENV)
    if engine_kwargs and (cache_only or engine is not None or client is not None or base_url is not None):
        raise InvalidInputError(
            "engine options (engine_kwargs, or model_kwargs' device / trust_remote_code / revision) "
            "configure a model loaded here from model_name=; a loaded engine (engine=, cache=) or "
            "a server has its own, so they would be ignored"
        )
    if cache_only:
        return cache  # type: ignore[return-value]
    if engine is not None:
        if model_name is not None:
            raise InvalidInputError("pass either engine= or model_name=, not both (the engine has its model)")
        if not isinstance(engine, Engine):
            raise InvalidInputError(f"engine must be a poolrag.Engine, not {type(engine).__name__}")
        return _behind_cache(engine, cache, truncate_prompt_tokens)
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
    args = engine_args or EngineArgs.from_options(model_name, engine_kwargs)
    return _behind_cache(Engine.from_engine_args(args), cache, truncate_prompt_tokens)


def _model_of(
    args: EngineArgs,
    model_name: str | os.PathLike[str] | None,
    engine: Engine | None,
    client: PoolragClient | None,
    base_url: str | None,
    engine_kwargs: dict[str, Any] | None,
) -> str:
    """The model ``engine_args=`` loads here, refusing the arguments that say something else."""
    if not isinstance(args, EngineArgs):
        raise InvalidInputError(f"engine_args must be a poolrag.EngineArgs, not {type(args).__name__}")
    if engine is not None or client is not None or base_url is not None:
        raise InvalidInputError(
            "engine_args= loads a model in this process: leave out engine=, client= and base_url="
        )
    if engine_kwargs:
        raise InvalidInputError("pass engine_args= or engine_kwargs=, not both")
    if model_name is not None and os.fspath(model_name) != args.model:
        raise InvalidInputError(f"model_name={os.fspath(model_name)!r} but engine_args names {args.model!r}")
    return args.model


def _behind_cache(engine: Engine, cache: object, truncate_prompt_tokens: int | None) -> PoolingBackend:
    """``engine`` as it is, or read through the given cache."""
    if cache is None:
        return engine
    if isinstance(cache, CachedEmbedder):
        if cache.backend is not engine:
            raise InvalidInputError("the CachedEmbedder wraps another engine than this adapter's")
        return cache
    if isinstance(cache, (str, os.PathLike)):
        cache = EmbeddingCache(cache)
    if not isinstance(cache, EmbeddingCache):
        raise InvalidInputError(
            f"cache must be an EmbeddingCache, a CachedEmbedder or a file path, not {type(cache).__name__}"
        )
    # The cache key covers truncation, so the embedder is built for this adapter's setting.
    base = PoolingParams.cut_at(truncate_prompt_tokens)
    return CachedEmbedder(engine, cache, pooling_params=base)


def backend_base_url(backend: PoolingBackend) -> str | None:
    """The server URL of a remote backend (``None`` in process), for the adapters' ``base_url`` field."""
    return backend.base_url if isinstance(backend, PoolragClient) else None
