"""Which :class:`~poolrag.backend.PoolingBackend` a caller means.

:func:`resolve_backend` takes one thing: a backend the caller built (an Engine, a PoolragClient, a
CachedEmbedder), a ``poolrag serve`` URL, or a model (a path or hub id) to load here with engine
options. The adapters' constructor arguments (``engine=``, ``model_name=``, ``base_url=``,
``client=``, ``engine_args=``, ``cache=``) name that one thing in several ways, so
:func:`adapter_backend` is the one place that turns them into it and refuses contradictory ones;
the adapters then hold one object and never ask which kind it is. :class:`~poolrag.Engine` (and with it
torch and transformers) is imported only where a model loads here or an ``engine=`` is checked, so an
adapter of a ``poolrag serve`` URL never loads them.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import TYPE_CHECKING, Any

from poolrag.backend import PoolingBackend
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.params import PoolingParams

if TYPE_CHECKING:
    from poolrag.engine import Engine

logger = logging.getLogger(__name__)

BASE_URL_ENV = "POOLRAG_BASE_URL"
API_KEY_ENV = "POOLRAG_API_KEY"

_OPTIONS_IGNORED = (
    "engine options (engine_kwargs, or model_kwargs' device / trust_remote_code / revision) "
    "configure a model loaded here from model_name=; a loaded engine (engine=, cache=) or "
    "a server has its own, so they would be ignored"
)
_ONE_PLACE = "pass only one of engine=, client= and base_url="
_LOADS_HERE = "engine_args= loads a model in this process: leave out engine=, client= and base_url="
#: adapter arguments that contradict each other, checked in this order: (one, other, why)
_CONFLICTS = (
    ("engine", "client", _ONE_PLACE),
    ("engine", "base_url", _ONE_PLACE),
    ("client", "base_url", _ONE_PLACE),
    ("engine_args", "engine", _LOADS_HERE),
    ("engine_args", "client", _LOADS_HERE),
    ("engine_args", "base_url", _LOADS_HERE),
    ("engine_args", "engine_kwargs", "pass engine_args= or engine_kwargs=, not both"),
    ("engine", "model_name", "pass either engine= or model_name=, not both (the engine has its model)"),
)
#: the keywords resolve_backend took before it took one backend, and how each is written now
_DEPRECATED_KEYWORDS = {
    "engine": "resolve_backend(engine)",
    "client": "resolve_backend(client)",
    "model_name": "resolve_backend(model_name, **engine_options)",
    "engine_kwargs": "resolve_backend(model_name, **engine_kwargs)",
    "engine_args": "resolve_backend(Engine.from_engine_args(engine_args))",
    "base_url": "resolve_backend(base_url), or resolve_backend(PoolragClient(base_url, api_key, model=...))",
    "api_key": "resolve_backend(PoolragClient(base_url, api_key))",
    "cache": "with_cache(resolve_backend(...), cache, truncate_prompt_tokens)",
    "truncate_prompt_tokens": "with_cache(resolve_backend(...), cache, truncate_prompt_tokens)",
}


def resolve_backend(
    backend: PoolingBackend | str | os.PathLike[str] | None = None, /, **engine_options: Any
) -> PoolingBackend:
    """The backend ``backend`` names.

    * a :class:`~poolrag.backend.PoolingBackend` (an Engine, a PoolragClient, a CachedEmbedder): itself;
    * an ``http(s)://`` URL: a :class:`PoolragClient` of that ``poolrag serve`` (key: ``$POOLRAG_API_KEY``);
    * any other string or path: that model (a path or hub id) loaded in this process with
      ``engine_options`` (checked by :class:`~poolrag.EngineArgs`: an unknown key is one line naming it);
    * nothing: the server ``$POOLRAG_BASE_URL`` names.

    Engine options beside a backend that is already loaded, or a server, are refused: they would be
    ignored. The keywords it took before (``engine=``, ``model_name=``, ``base_url=``, ...) still work
    for one release, with a :class:`DeprecationWarning` naming the new spelling.
    """
    deprecated = sorted(engine_options.keys() & _DEPRECATED_KEYWORDS.keys())
    if deprecated:
        return _deprecated_call(backend, engine_options, deprecated)
    if backend is None:
        backend = os.environ.get(BASE_URL_ENV)
        if backend is None:
            raise InvalidInputError(
                f"say which model to run: an Engine, a model path or hub id, a server URL or ${BASE_URL_ENV}"
            )
    if isinstance(backend, os.PathLike) or (isinstance(backend, str) and not _is_url(backend)):
        logger.info("loading %s in process", os.fspath(backend))
        return engine_class().from_engine_args(EngineArgs.from_options(os.fspath(backend), engine_options))
    if engine_options:
        raise InvalidInputError(_OPTIONS_IGNORED)
    if isinstance(backend, str):
        return PoolragClient(backend)
    if not _is_backend(backend):
        raise InvalidInputError(
            "backend must be a PoolingBackend (an Engine, a PoolragClient, a CachedEmbedder), a model "
            f"path or hub id, or a server URL, not {type(backend).__name__}"
        )
    return backend


def with_cache(
    backend: PoolingBackend,
    cache: CachedEmbedder | EmbeddingCache | str | os.PathLike[str] | None,
    truncate_prompt_tokens: int | None = -1,
) -> PoolingBackend:
    """``backend`` read through ``cache`` (an :class:`EmbeddingCache` or its path, keyed with
    ``truncate_prompt_tokens``; or a :class:`CachedEmbedder` of this very backend), or as it is."""
    if cache is None:
        return backend
    if isinstance(backend, PoolragClient):
        raise InvalidInputError(
            "cache= caches a model loaded in this process (engine= or model_name=); a server's "
            "vectors can be cached in your own code with poolrag.cache.CachedEmbedder(PoolragClient(...))"
        )
    if isinstance(cache, CachedEmbedder):
        if cache.backend is not backend:
            raise InvalidInputError("the CachedEmbedder wraps another engine than this adapter's")
        return cache
    if isinstance(cache, (str, os.PathLike)):
        cache = EmbeddingCache(cache)
    if not isinstance(cache, EmbeddingCache):
        raise InvalidInputError(
            f"cache must be an EmbeddingCache, a CachedEmbedder or a file path, not {type(cache).__name__}"
        )
    # The cache key covers truncation, so the embedder is built for this adapter's setting.
    return CachedEmbedder(backend, cache, pooling_params=PoolingParams.cut_at(truncate_prompt_tokens))


def adapter_backend(
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
    task: str | None = None,
) -> PoolingBackend:
    """The backend an adapter's constructor arguments name (every adapter of both frameworks takes
    these): ``engine=`` shared, ``model_name=`` loaded here with ``engine_kwargs`` (or
    ``engine_args=``), ``base_url=`` (or ``$POOLRAG_BASE_URL`` when nothing else is given) called
    with ``api_key`` and ``model_name`` as the served name (none: the model the server runs the
    adapter's ``task`` with), or ``client=`` shared; then read through ``cache`` (a
    :class:`CachedEmbedder` alone also says which engine runs)."""
    shared = engine if engine is not None else cache if isinstance(cache, CachedEmbedder) else None
    if model_name is not None and shared is not None and os.fspath(model_name) == shared.facts.model_name:
        # an adapter rebuilt from its own fields (LangChain's configurable_fields) carries the name
        # it filled in from engine= or cache=: the same model, not a second one to load
        model_name = None
    given = {
        "engine": engine is not None,
        "client": client is not None,
        "model_name": model_name is not None,
        "base_url": base_url is not None,
        "engine_kwargs": bool(engine_kwargs),
        "engine_args": engine_args is not None,
    }
    for one, other, why in _CONFLICTS:
        if given[one] and given[other]:
            raise InvalidInputError(why)
    if engine is not None:
        _check_instance(engine, engine_class(), "engine", "a poolrag.Engine")
    _check_instance(client, PoolragClient, "client", "a PoolragClient")
    _check_instance(engine_args, EngineArgs, "engine_args", "a poolrag.EngineArgs")
    if engine_args is not None and model_name is not None and os.fspath(model_name) != engine_args.model:
        named = os.fspath(model_name)
        raise InvalidInputError(f"model_name={named!r} but engine_args names {engine_args.model!r}")
    named = _named_backend(engine, client, model_name, base_url, api_key, cache, engine_args, task)
    backend = resolve_backend(named, **(engine_kwargs or {}))
    return with_cache(backend, None if backend is cache else cache, truncate_prompt_tokens)


def _named_backend(
    engine: Engine | None,
    client: PoolragClient | None,
    model_name: str | os.PathLike[str] | None,
    base_url: str | None,
    api_key: str | None,
    cache: object,
    engine_args: EngineArgs | None,
    task: str | None,
) -> PoolingBackend | str | os.PathLike[str]:
    """The one backend (or model to load) the non-contradictory adapter arguments name."""
    if engine is not None:
        return engine
    if client is not None:
        return client
    if engine_args is not None:
        logger.info("loading %s in process", engine_args.model)
        return engine_class().from_engine_args(engine_args)
    if base_url is None and model_name is None:
        if isinstance(cache, CachedEmbedder):  # it already wraps the engine to run
            return cache
        base_url = os.environ.get(BASE_URL_ENV)
        if base_url is None:
            raise InvalidInputError(
                "say which model to run: engine=, model_name= (a path or hub id), base_url= "
                f"or ${BASE_URL_ENV}"
            )
    if base_url is not None:
        model = None if model_name is None else str(model_name)
        return PoolragClient(str(base_url), api_key, model=model, task=task)
    return model_name  # type: ignore[return-value]


def engine_class() -> type[Engine]:
    """:class:`poolrag.Engine`, imported on first use: torch and transformers load with it."""
    from poolrag.engine import Engine

    return Engine


def _check_instance(value: object, cls: type, name: str, what: str) -> None:
    if value is not None and not isinstance(value, cls):
        raise InvalidInputError(f"{name} must be {what}, not {type(value).__name__}")


#: what a PoolingBackend has, read off the protocol itself
_BACKEND_MEMBERS = tuple(name for name in vars(PoolingBackend) if not name.startswith("_"))


def _is_backend(value: object) -> bool:
    """``isinstance(value, PoolingBackend)`` without reading ``facts``: on Python 3.11 the protocol
    check reads every property, and a client's ``facts`` asks its server."""
    return all(hasattr(type(value), name) for name in _BACKEND_MEMBERS)


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _deprecated_call(backend: object, keywords: dict[str, Any], deprecated: list[str]) -> PoolingBackend:
    """The old ``resolve_backend(engine=..., model_name=..., ...)``, kept for one release."""
    spellings = dict.fromkeys(_DEPRECATED_KEYWORDS[name] for name in deprecated)
    warnings.warn(
        f"resolve_backend({', '.join(f'{name}=' for name in deprecated)}) is deprecated and goes in the "
        f"next release; write {'; '.join(spellings)} (with_cache and adapter_backend are in "
        f"{__name__})",
        DeprecationWarning,
        stacklevel=3,
    )
    if backend is not None:
        raise InvalidInputError("pass one backend, or the old keywords (engine=, model_name=, ...), not both")
    return adapter_backend(**keywords)
