"""PoolragClient, and a CachedEmbedder around one (the documented way to cache a server's vectors),
import neither torch nor transformers, from the import to the answers: a program that calls a
``poolrag serve`` does not load the engine's stack (seconds of start-up, and the server's business)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from poolrag import Engine
from poolrag.testing.fresh_imports import assert_imports_no_engine_stack
from poolrag.testing.live_server import serve


@pytest.fixture(scope="module")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm")


def test_a_client_and_a_cache_around_it_import_neither_torch_nor_transformers(
    minilm_url: str, tmp_path: Path
) -> None:
    code = f"""
from poolrag import PoolingParams
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient

client = PoolragClient({minilm_url!r})
assert client.embed_array(["a cat", "a dog"]).shape == (2, 384)
assert client.score("a cat", ["a kitten"])[0].outputs.score > 0
assert client.encode(["a cat"], pooling_task="token_embed")[0].outputs.data.shape[1] == 384
cached = CachedEmbedder(client, EmbeddingCache({str(tmp_path / "cache.sqlite")!r}))
for _ in range(2):  # computed, then read from the cache
    assert cached.embed_array(["a cat"], PoolingParams(truncate_prompt_tokens=-1)).shape == (1, 384)
"""
    assert_imports_no_engine_stack(code)
