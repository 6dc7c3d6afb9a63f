"""A user of a ``poolrag serve`` never loads the engine's stack: importing the package, building
PoolragEmbedding with ``base_url=`` or ``client=`` and calling it imports neither torch nor
transformers (seconds of start-up, and the server's business)."""

from __future__ import annotations

from poolrag.testing.fresh_imports import assert_imports_no_engine_stack


def test_remote_embeddings_import_neither_torch_nor_transformers(minilm_url: str) -> None:
    code = f"""
from llama_index.embeddings.poolrag import PoolragEmbedding
from poolrag.client import PoolragClient

assert len(PoolragEmbedding(base_url={minilm_url!r}).get_query_embedding("a cat")) == 384
embedding = PoolragEmbedding(client=PoolragClient({minilm_url!r}))
assert len(embedding.get_text_embedding_batch(["a cat", "a dog"])) == 2
"""
    assert_imports_no_engine_stack(code)
