"""PoolragEmbeddings: LangChain's standard unit suite, construction and the input it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_poolrag import PoolragEmbeddings
from langchain_tests.unit_tests import EmbeddingsUnitTests

from poolrag import Engine, InputTypeError, InvalidInputError


class TestStandardUnit(EmbeddingsUnitTests):
    """Constructed from a model path (loads its own engine) and from environment variables."""

    @pytest.fixture(autouse=True)
    def _model_path(self, minilm_path: Path) -> None:
        type(self).model_path = str(minilm_path)

    @property
    def embeddings_class(self) -> type[PoolragEmbeddings]:
        return PoolragEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model_name": self.model_path}

    @property
    def init_from_env_params(self) -> tuple[dict, dict, dict]:
        url = "http://127.0.0.1:9"  # never contacted: construction does not call the server
        return (
            {"POOLRAG_BASE_URL": url, "POOLRAG_API_KEY": "env-key"},
            {},
            {"base_url": url, "api_key": "env-key"},
        )


def test_bad_input_is_refused_clearly(minilm_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    with pytest.raises(InputTypeError):
        embeddings.embed_query(42)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="list of strings"):
        embeddings.embed_documents("one string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        embeddings.embed_documents(["fine", ""])
    assert embeddings.embed_documents([]) == []


def test_construction_needs_exactly_one_model_source(
    minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pydantic reports constructor errors as ValidationError, a ValueError, with poolrag's message.
    monkeypatch.delenv("POOLRAG_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="which model"):
        PoolragEmbeddings()
    with pytest.raises(ValueError, match="only one"):
        PoolragEmbeddings(engine=minilm_engine, base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="not both"):
        PoolragEmbeddings(engine=minilm_engine, model_name="other")
    with pytest.raises(ValueError, match="http"):
        PoolragEmbeddings(base_url="127.0.0.1:8000")
    with pytest.raises(ValueError, match="instance of Engine"):
        PoolragEmbeddings(engine="not an engine")
    with pytest.raises(ValueError, match="instance of PoolragClient"):
        PoolragEmbeddings(client="http://127.0.0.1:9")


def test_an_adapter_sharing_an_engine_is_rebuilt_from_its_own_fields(minilm_engine: Engine) -> None:
    """LangChain rebuilds a runnable from its field values (configurable_fields), and those name the
    model the adapter filled in from engine=: the same model, so the rebuilt adapter shares the engine."""
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    assert embeddings.model_name == minilm_engine.facts.model_name
    rebuilt = PoolragEmbeddings(**{**dict(embeddings), "truncate_prompt_tokens": 4})
    assert rebuilt.backend is minilm_engine
    text = "a long sentence about the sea"
    assert rebuilt.embed_query(text) == PoolragEmbeddings(
        engine=minilm_engine, truncate_prompt_tokens=4
    ).embed_query(text)
    assert rebuilt.embed_query(text) != embeddings.embed_query(text)
    with pytest.raises(ValueError, match="not both"):  # another model's name still contradicts engine=
        PoolragEmbeddings(engine=minilm_engine, model_name="other")
