"""A Ray actor and a Ray Serve replica leave what loading made out of Python's cyclic collections
once their engines are loaded, as ``poolrag serve`` and ``poolrag ingest`` do in one process."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolrag.engine_args import EngineArgs
from poolrag.scaleout.ray_ingest import ChunkEmbedder, EngineRecipe
from poolrag.scaleout.ray_serve import load_engines
from poolrag.server.settings import ServerSettings


@pytest.fixture
def thawed() -> Iterator[None]:
    """This test process's collector as it was: what the test froze is unfrozen afterwards."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_replica_freezes_once_its_engines_are_loaded(thawed: None, minilm_path: Path) -> None:
    settings = ServerSettings(served_model_names=("minilm",))
    engines = load_engines([(EngineArgs(str(minilm_path)), settings)])
    assert [one for _, one in engines] == [settings]
    assert gc.get_freeze_count() > 50_000


def test_an_ingest_actor_freezes_once_its_engine_is_loaded(
    ray_cluster, thawed: None, minilm_path: Path
) -> None:
    recipe = EngineRecipe(EngineArgs(str(minilm_path), max_model_len=32))
    actor = ChunkEmbedder(recipe, cache_path=None, existing_ids=frozenset(), cpu_threads=1)
    assert actor.chunker.max_tokens <= 32
    assert gc.get_freeze_count() > 50_000
