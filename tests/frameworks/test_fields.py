"""The adapters' shared fields: what an adapter given ``engine=`` / ``engine_args=`` serialises of
that engine, and that the serialised adapter loads the same engine again."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from poolrag import Engine, EngineArgs
from poolrag.frameworks.fields import EmbeddingFields
from poolrag.tokenization.score_template import load_score_template


def test_an_engine_with_a_score_template_object_is_rebuilt_from_the_serialised_adapter(
    minilm_path: Path,
) -> None:
    """A ScoreTemplate with an instruction (``with_variables``) was serialised as a dict that
    ``Engine`` refused ("score_template must be a template name, a .jinja path or Jinja text"), so
    the adapter's ``from_json`` failed."""
    template = load_score_template("qwen3_reranker").with_variables(instruction="Find the law")
    adapter = EmbeddingFields(engine=Engine(minilm_path, score_template=template))
    again = EmbeddingFields(**json.loads(adapter.model_dump_json()))
    assert load_score_template(again.backend.engine_args.score_template) == template


def test_engine_options_holding_torch_values_serialise_as_their_names(minilm_path: Path) -> None:
    """A torch dtype inside ``hf_overrides`` made the adapter's JSON dump raise, where a top-level
    ``dtype`` was written as its name."""
    args = EngineArgs(model=str(minilm_path), hf_overrides={"torch_dtype": torch.float32})
    dumped = json.loads(EmbeddingFields(engine_args=args).model_dump_json())
    assert dumped["engine_kwargs"] == {"hf_overrides": {"torch_dtype": "float32"}}
    again = EmbeddingFields(**dumped)
    assert again.backend.engine_args.hf_overrides == {"torch_dtype": "float32"}


def test_a_hub_token_in_engine_kwargs_is_neither_serialised_nor_shown(minilm_path: Path) -> None:
    """``engine_kwargs={"hf_token": ...}`` (also where ``token=`` of the HuggingFace-shaped classes
    lands) was written into the adapter's JSON (LlamaIndex's to_json, cache keys) and its repr;
    the engine still loads with it."""
    adapter = EmbeddingFields(model_name=str(minilm_path), engine_kwargs={"hf_token": "hf_SECRET"})
    assert adapter.backend.engine_args.hf_token == "hf_SECRET"
    assert "hf_SECRET" not in adapter.model_dump_json()
    assert "hf_SECRET" not in repr(adapter)
    assert "hf_SECRET" not in str(adapter.model_dump())
