"""``IngestionPipeline(num_workers=2)`` with a ``PoolragEmbedding`` gives the serial run's vectors.

LlamaIndex sends its transformations to worker processes pickled: ``run()`` to spawned ones (the
engine is loaded again there), ``arun()`` to forked ones, which inherit an engine whose threads (and
torch's OpenMP team) ran in the parent; that one hung forever before the engine survived a fork. The
pipeline runs in a child process under a timeout, so a hang fails the test instead of the CI job.
No ``SentenceSplitter``: its pickled tiktoken encoding is fetched from the network in a spawned
worker, and LlamaIndex's pool then waits forever for the task that worker dropped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_PIPELINE = """
import asyncio, sys
import numpy as np
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import TextNode
from llama_index.embeddings.poolrag import PoolragEmbedding

if __name__ == "__main__":
    folder, method = sys.argv[1:]
    model = PoolragEmbedding(model_name=folder, embed_batch_size=8)
    nodes = [TextNode(text=f"note {i} on topic {i % 7}: " + "words " * (i % 13)) for i in range(50)]
    serial = np.asarray(model.get_text_embedding_batch([n.text for n in nodes]))  # engine ran here first
    pipeline = IngestionPipeline(transformations=[model])
    if method == "run":
        done = pipeline.run(nodes=nodes, num_workers=2)
    else:
        done = asyncio.run(pipeline.arun(nodes=nodes, num_workers=2))
    by_text = {n.text: n.embedding for n in done}
    parallel = np.asarray([by_text[n.text] for n in nodes])
    print(len(done), float(np.abs(parallel - serial).max()))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="arun's workers are forked on Linux")
@pytest.mark.parametrize("method", ["run", "arun"])
def test_a_pipeline_with_two_workers_gives_the_serial_vectors(minilm_path: Path, method: str) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PIPELINE, str(minilm_path), method],
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"IngestionPipeline.{method}(num_workers=2) hung")
    assert done.returncode == 0, done.stderr[-2000:]
    count, gap = done.stdout.split()
    assert int(count) == 50
    assert float(gap) < 1e-5
