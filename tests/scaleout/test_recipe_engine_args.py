"""The Ray recipes carry an ``EngineArgs`` (frozen, picklable), not a mapping of keywords: the
options reach the actors as they were checked on the driver (issue 28, item 2)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import ray

from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.ingest import read_paths
from poolrag.scaleout.ray_ingest import EngineRecipe, _document_row, _model_parts


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


def test_what_actors_read_is_named_absolutely_for_a_cluster_started_elsewhere(
    minilm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor runs in its raylet's working directory: on a cluster started from another folder,
    ``poolrag ingest docs --model ./model --ray ADDRESS`` failed to find 'docs/...' and './model'.
    The driver names the files, the model folder and the cache file absolutely; a hub id stays."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("A note about kettles.")
    (tmp_path / "model").symlink_to(minilm_path, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    recipe = EngineRecipe(EngineArgs("model", tokenizer="model"))
    assert recipe.model == str(tmp_path / "model") == recipe.engine_args.tokenizer
    assert (
        EngineRecipe("sentence-transformers/all-MiniLM-L6-v2").model
        == "sentence-transformers/all-MiniLM-L6-v2"
    )
    (doc,) = read_paths([Path("docs")])
    assert _document_row(doc)["path"] == str(tmp_path / "docs" / "a.md")


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
