"""What the LangChain / LlamaIndex adapters call to load a model: ``engine_args=`` beside
``engine_kwargs=``, the latter checked through ``EngineArgs`` (issue 28, item 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from poolrag import Engine, EngineArgs, InputTypeError, InvalidInputError
from poolrag.frameworks.backend_resolution import resolve_backend
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
