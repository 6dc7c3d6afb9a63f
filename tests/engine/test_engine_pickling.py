"""An engine crosses processes as the arguments that made it (worker pools, LlamaIndex's
``IngestionPipeline(num_workers=...)``) and is shared, not copied, by ``copy``."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from poolrag import Engine, PoolingParams
from poolrag.errors import ModelLoadError

TEXTS = ["bees dance to point at flowers", "a kitten sleeps"]


def test_an_unpickled_engine_is_loaded_again_with_the_same_options(tiny_model) -> None:
    engine = Engine(tiny_model("bert"), max_model_len=24, pooler_config={"pooling_type": "CLS"})
    again = pickle.loads(pickle.dumps(engine))
    assert again is not engine and (again.max_model_len, again.pooler_config) == (24, engine.pooler_config)
    assert again.facts == engine.facts
    np.testing.assert_allclose(again.embed_array(TEXTS), engine.embed_array(TEXTS), atol=1e-6)


def test_copies_share_the_engine(minilm_engine: Engine) -> None:
    assert copy.copy(minilm_engine) is minilm_engine
    assert copy.deepcopy({"embedder": minilm_engine})["embedder"] is minilm_engine


def _embed_in_worker(engine: Engine) -> np.ndarray:
    return engine.embed_array(TEXTS, PoolingParams(normalize=False))


def test_a_worker_process_embeds_with_the_engine_it_was_sent(
    minilm_path: Path, minilm_engine: Engine
) -> None:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        vectors = pool.apply(_embed_in_worker, (Engine(minilm_path, tune="off"),))
    np.testing.assert_allclose(vectors, _embed_in_worker(minilm_engine), atol=1e-5)


def test_an_unpickled_engine_that_loads_other_weights_is_refused(tiny_model, tmp_path: Path) -> None:
    """The same arguments must give the same weights in the loading process; a folder whose
    weights changed since (a hub id resolving to a newer snapshot) is refused naming both."""
    folder = shutil.copytree(tiny_model("bert"), tmp_path / "model")
    pickled = pickle.dumps(Engine(folder, tune="off"))
    weights = load_file(str(folder / "model.safetensors"))
    save_file(
        {k: v + 0.5 if v.is_floating_point() else v for k, v in weights.items()},
        str(folder / "model.safetensors"),
    )
    with pytest.raises(ModelLoadError, match="loaded other weights here"):
        pickle.loads(pickled)
