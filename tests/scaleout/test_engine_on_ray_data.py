"""An Engine in a Ray Data actor, as Ray users embed a column with sentence-transformers: the
batch's text column goes to ``embed_array`` as Ray Data hands it over."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from ray import cloudpickle

from poolrag.engine import Engine

# The test's actor class travels to the workers by value (they cannot import this test module).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class EmbedText:
    """The ``map_batches`` class a Ray user writes: one engine per actor, a vector per row."""

    def __init__(self, model: str) -> None:
        self.engine = Engine(model)

    def __call__(self, batch: Any) -> Any:
        vectors = self.engine.embed_array(batch["text"])
        batch["embedding"] = vectors if isinstance(batch, dict) else list(vectors)
        return batch


@pytest.mark.parametrize("batch_format", ["numpy", "pandas"])
def test_a_batch_column_is_embedded_as_the_offline_engine_embeds_it(
    ray_cluster, minilm_path: Path, minilm_engine: Engine, batch_format: str
) -> None:
    texts = [f"note {i} on {'kettles' if i % 2 else 'tax law'}" for i in range(10)]
    dataset = ray.data.from_items([{"id": i, "text": text} for i, text in enumerate(texts)])
    rows = (
        dataset.map_batches(
            EmbedText,
            fn_constructor_kwargs={"model": str(minilm_path)},
            concurrency=1,
            batch_size=4,
            batch_format=batch_format,
        )
        .to_pandas()
        .sort_values("id")
    )
    assert rows["text"].tolist() == texts
    np.testing.assert_allclose(np.stack(rows["embedding"]), minilm_engine.embed_array(texts), atol=1e-6)
