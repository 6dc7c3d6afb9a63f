"""Which backend a caller means: ``resolve_backend(backend, **engine_options)`` takes one thing (a
backend built by the caller, a server URL, or a model to load here); the adapters' arguments
(``engine_args=`` beside ``engine_kwargs=``, the latter checked through ``EngineArgs``, issue 28,
item 2) go through ``adapter_backend``; the old keywords work for one release with a warning."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from poolrag import Engine, EngineArgs, InputTypeError, InvalidInputError
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.frameworks.backend_resolution import adapter_backend, resolve_backend, with_cache
from poolrag.frameworks.fields import EmbeddingFields


@pytest.fixture(scope="module")
def folder(tiny_model: Callable[..., Path]) -> str:
    return str(tiny_model("bert"))


def test_engine_args_load_the_engine_they_describe(folder: str) -> None:
    backend = resolve_backend(engine_args=EngineArgs(folder, max_model_len=24))
    assert isinstance(backend, Engine) and backend.max_model_len == 24
    named = resolve_backend(model_name=folder, engine_args=EngineArgs(folder, max_model_len=20))
    assert isinstance(named, Engine) and named.max_model_len == 20


def test_engine_kwargs_go_through_engine_args(folder: str) -> None:
    backend = resolve_backend(model_name=folder, engine_kwargs={"max_model_len": 24})
    assert isinstance(backend, Engine) and backend.max_model_len == 24
    with pytest.raises(InputTypeError, match=r"unknown options \['max_seq_len'\]") as caught:
        resolve_backend(model_name=folder, engine_kwargs={"max_seq_len": 24})
    assert "\n" not in str(caught.value)
    with pytest.raises(InvalidInputError, match="max_model_len must be a positive integer"):
        resolve_backend(model_name=folder, engine_kwargs={"max_model_len": 0})


@pytest.mark.parametrize(
    ("others", "message"),
    [
        ({"engine_kwargs": {"dtype": "float32"}}, "engine_args= or engine_kwargs=, not both"),
        ({"base_url": "http://127.0.0.1:9"}, "leave out engine=, client= and base_url="),
        ({"model_name": "another/model"}, "but engine_args names"),
        ({"engine_args": {"model": "x"}}, "engine_args must be a poolrag.EngineArgs"),
    ],
)
def test_contradicting_arguments_are_refused(folder: str, others: dict, message: str) -> None:
    given = {"engine_args": EngineArgs(folder)} | others
    with pytest.raises(InvalidInputError, match=message):
        resolve_backend(**given)


def test_engine_kwargs_with_a_loaded_engine_or_a_server_are_refused_not_ignored(folder: str) -> None:
    engine = Engine(folder)
    for others in ({"engine": engine}, {"base_url": "http://127.0.0.1:9"}):
        with pytest.raises(InvalidInputError, match="configure a model loaded here"):
            resolve_backend(**others, engine_kwargs={"device": "cpu"})
    with pytest.MonkeyPatch.context() as env:  # the server named by the environment
        env.setenv("POOLRAG_BASE_URL", "http://127.0.0.1:9")
        with pytest.raises(InvalidInputError, match="configure a model loaded here"):
            resolve_backend(engine_kwargs={"device": "cpu"})
    assert resolve_backend(engine=engine, engine_kwargs={}) is engine  # the adapters' default


def test_the_adapters_shared_fields_take_engine_args(folder: str) -> None:
    fields = EmbeddingFields(engine_args=EngineArgs(folder, max_model_len=24))
    assert isinstance(fields.backend, Engine) and fields.backend.max_model_len == 24
    assert "engine_args" not in fields.model_dump()  # a loader's options, not the adapter's state


def test_one_backend_is_passed_as_it_is(folder: str, tmp_path: Path) -> None:
    engine = Engine(folder)
    assert resolve_backend(engine) is engine
    client = PoolragClient("http://127.0.0.1:9")
    assert resolve_backend(client) is client
    cached = CachedEmbedder(engine, EmbeddingCache(tmp_path / "embeddings.sqlite"))
    assert resolve_backend(cached) is cached
    with pytest.raises(InvalidInputError, match="configure a model loaded here"):
        resolve_backend(engine, max_model_len=24)  # the engine has its options: they would be ignored
    with pytest.raises(InvalidInputError, match="backend must be a PoolingBackend"):
        resolve_backend(42)  # type: ignore[arg-type]


def test_a_model_name_is_loaded_here_with_the_engine_options(folder: str) -> None:
    backend = resolve_backend(folder, max_model_len=24)
    assert isinstance(backend, Engine) and backend.max_model_len == 24
    assert isinstance(resolve_backend(Path(folder)), Engine)
    with pytest.raises(InputTypeError, match=r"unknown options \['max_seq_len'\]"):
        resolve_backend(folder, max_seq_len=24)


def test_a_url_is_a_client_of_that_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOLRAG_API_KEY", "env-key")
    client = resolve_backend("http://127.0.0.1:9/v1")  # construction does not call the server
    assert isinstance(client, PoolragClient)
    assert (client.base_url, client.api_key) == ("http://127.0.0.1:9", "env-key")
    with pytest.raises(InvalidInputError, match="configure a model loaded here"):
        resolve_backend("http://127.0.0.1:9", device="cpu")
    monkeypatch.setenv("POOLRAG_BASE_URL", "http://127.0.0.1:8")
    assert resolve_backend().base_url == "http://127.0.0.1:8"  # type: ignore[attr-defined]
    monkeypatch.delenv("POOLRAG_BASE_URL")
    with pytest.raises(InvalidInputError, match="say which model to run"):
        resolve_backend()


def test_with_cache_reads_the_backend_through_a_cache(folder: str, tmp_path: Path) -> None:
    engine = resolve_backend(folder)
    cached = with_cache(engine, tmp_path / "embeddings.sqlite", truncate_prompt_tokens=8)
    assert isinstance(cached, CachedEmbedder) and cached.backend is engine
    np.testing.assert_array_equal(cached.embed_array(["a b c"]), engine.embed_array(["a b c"]))
    assert with_cache(engine, None) is engine
    with pytest.raises(InvalidInputError, match="caches a model loaded in this process"):
        with_cache(PoolragClient("http://127.0.0.1:9"), tmp_path / "remote.sqlite")


def _old_calls(folder: str, engine: Engine, tmp_path: Path) -> list[tuple[dict[str, Any], str, Callable]]:
    """Each keyword resolve_backend took before one backend, in a call it answered, the new
    spelling its warning names, and what the call must still give."""
    url = "http://127.0.0.1:9"
    client = PoolragClient(url)
    return [
        ({"engine": engine}, "resolve_backend(engine)", lambda b: b is engine),
        ({"client": client}, "resolve_backend(client)", lambda b: b is client),
        (
            {"model_name": folder},
            "resolve_backend(model_name, **engine_options)",
            lambda b: isinstance(b, Engine) and b.model_name == folder,
        ),
        (
            {"model_name": folder, "engine_kwargs": {"max_model_len": 24}},
            "resolve_backend(model_name, **engine_kwargs)",
            lambda b: isinstance(b, Engine) and b.max_model_len == 24,
        ),
        (
            {"engine_args": EngineArgs(folder, max_model_len=20)},
            "resolve_backend(Engine.from_engine_args(engine_args))",
            lambda b: isinstance(b, Engine) and b.max_model_len == 20,
        ),
        ({"base_url": url}, "resolve_backend(base_url)", lambda b: b.base_url == url),
        (
            {"base_url": url, "api_key": "k"},
            "resolve_backend(PoolragClient(base_url, api_key))",
            lambda b: (b.base_url, b.api_key) == (url, "k"),
        ),
        (
            {"engine": engine, "cache": tmp_path / "c.sqlite"},
            "with_cache(resolve_backend(...), cache, truncate_prompt_tokens)",
            lambda b: isinstance(b, CachedEmbedder) and b.backend is engine,
        ),
        (
            {"engine": engine, "truncate_prompt_tokens": None},
            "with_cache(resolve_backend(...), cache, truncate_prompt_tokens)",
            lambda b: b is engine,  # truncation keys a cache; without one the engine is used as it is
        ),
    ]


def test_each_old_keyword_still_works_with_a_deprecation_warning_naming_the_new_spelling(
    folder: str, tmp_path: Path
) -> None:
    engine = Engine(folder)
    calls = _old_calls(folder, engine, tmp_path)
    old = {"engine", "client", "model_name", "base_url", "api_key", "cache", "engine_kwargs", "engine_args"}
    assert {name for keywords, *_ in calls for name in keywords} == {*old, "truncate_prompt_tokens"}
    for keywords, spelling, still_gives in calls:
        with pytest.warns(DeprecationWarning, match=re.escape(spelling)):
            backend = resolve_backend(**keywords)
        assert still_gives(backend), keywords
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInputError, match="not both"):
        resolve_backend(engine, model_name=folder)


def test_the_new_form_and_the_adapters_warn_about_nothing(folder: str) -> None:
    engine = Engine(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert resolve_backend(engine) is engine
        assert adapter_backend(engine=engine, engine_kwargs={}) is engine
        assert EmbeddingFields(engine=engine).backend is engine
