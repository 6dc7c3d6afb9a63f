"""The Ray recipes carry an ``EngineArgs`` (frozen, picklable), not a mapping of keywords: the
options reach the actors as they were checked on the driver (issue 28, item 2)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import ray

from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.scaleout.ray_ingest import EngineRecipe, _model_parts


def test_a_recipe_pickles_with_its_engine_args(minilm_path: Path) -> None:
    args = EngineArgs(str(minilm_path), max_model_len=32, hf_overrides={"is_matryoshka": True})
    recipe = EngineRecipe(args, dimensions=128, chunk_tokens=24)
    for dumps, loads in ((pickle.dumps, pickle.loads), (ray.cloudpickle.dumps, ray.cloudpickle.loads)):
        again = loads(dumps(recipe))
        assert again == recipe and again.engine_args == args and again.model == str(minilm_path)


def test_a_bare_model_is_its_default_args_and_a_mapping_is_refused() -> None:
    assert EngineRecipe("some/model").engine_args == EngineArgs("some/model")
    with pytest.raises(InvalidInputError, match="engine_args must be EngineArgs, not dict"):
        EngineRecipe({"model": "some/model", "dtype": "float32"})  # type: ignore[arg-type]


def test_the_options_reach_the_actor(ray_cluster, minilm_path: Path) -> None:
    """The model-parts task builds the engine from the recipe on a worker: the chunker it hands back
    fits the token limit the driver's args set, not the model's own 256."""
    recipe = EngineRecipe(EngineArgs(str(minilm_path), max_model_len=32))
    _source, chunker, sparse = ray.get(_model_parts.remote(recipe, None))  # type: ignore[attr-defined]
    assert 0 < chunker.max_tokens <= 32 and sparse is None


def test_the_model_parts_task_neither_tunes_nor_compiles(
    minilm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model-parts engine only reads facts and the tokenizer: a recipe that asks the actors to
    tune in full still leaves no timing verdict (nor compiled graph) behind from this task, whose
    measuring would take CPU from the actors that embed."""
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path))
    recipe = EngineRecipe(EngineArgs(str(minilm_path), max_model_len=32, tune="full"))
    source, chunker, _sparse = _model_parts._function(recipe, None)  # type: ignore[attr-defined]
    assert source.dimension == 384 and chunker.max_tokens <= 32
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
