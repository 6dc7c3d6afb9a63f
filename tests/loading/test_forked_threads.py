"""An engine built in a worker forked from a process whose main thread ran torch loads and answers.

GNU OpenMP (torch's CPU wheel) leaves a forked child's copy of a thread's team without its threads:
LlamaIndex's ``IngestionPipeline.arun(num_workers=...)`` builds the embedding class's engine in
each forked worker, and the load waited forever in its first large ``torch.cat``."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from poolrag import Engine
from poolrag.testing.fork_while_held import in_fork_while_held

TEXTS = ["a cat sat on the mat", "tax law", "the quick brown fox"]


def _build_and_embed(folder: str) -> np.ndarray:
    with Engine(folder) as engine:
        return engine.embed_array(TEXTS)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_an_engine_built_in_a_forked_worker_loads_and_answers(minilm_path: Path) -> None:
    torch.cat([torch.ones(1000, 1000)] * 3).sum()  # this thread's OpenMP team exists before the fork
    threads = torch.get_num_threads()
    expected = _build_and_embed(str(minilm_path))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_build_and_embed, (str(minilm_path),)).get(timeout=120)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    assert torch.get_num_threads() == threads  # only the forked child loads on one thread


_PARENT_WITHOUT_POOLRAG = """
import multiprocessing, sys
import torch

def build_and_embed(folder):
    from poolrag import Engine  # first imported here, after the fork

    with Engine(folder) as engine:
        return engine.embed_array(["a cat sat on the mat", "tax law"]).shape

torch.cat([torch.ones(1000, 1000)] * 3).sum()  # the main thread's OpenMP team, before the fork
assert "poolrag.loading.forked_threads" not in sys.modules
with multiprocessing.get_context("fork").Pool(1) as pool:
    try:
        print(pool.apply_async(build_and_embed, (sys.argv[1],)).get(timeout=90))
    except multiprocessing.TimeoutError:
        print("hung")
        pool.terminate()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_worker_forked_before_poolrag_was_imported_loads_and_answers(minilm_path: Path) -> None:
    """A parent that ran torch but never imported poolrag (the engine is built only in its forked
    workers) registered no fork hook: the child still loads on one thread."""
    import subprocess

    run = subprocess.run(
        [sys.executable, "-c", _PARENT_WITHOUT_POOLRAG, str(minilm_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.stdout.strip().splitlines()[-1:] == ["(2, 384)"], run.stderr[-2000:]


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_an_engine_built_in_a_worker_forked_while_a_thread_built_one_loads(minilm_path: Path) -> None:
    """One model is built at a time in a process; a thread of the parent building one at the fork (a
    first load's background tune builds its other path 0.5 s after the load) never finishes in the
    child, which waited forever for its turn to build (2 forks in 3 hung, a second apart)."""
    from poolrag.core import model_setup

    got = in_fork_while_held(model_setup.MODEL_CONSTRUCTION, _build_and_embed, str(minilm_path))
    np.testing.assert_allclose(got, _build_and_embed(str(minilm_path)), atol=1e-6, rtol=0)
