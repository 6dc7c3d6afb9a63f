"""A user of a ``poolrag serve`` never loads the engine's stack: importing the package, building its
classes with ``base_url=`` (a sparse model's server) and calling them imports neither torch nor
transformers (seconds of start-up, and the server's business)."""

from __future__ import annotations

from poolrag.testing.fresh_imports import assert_imports_no_engine_stack


def test_remote_sparse_embeddings_import_neither_torch_nor_transformers(splade_url: str) -> None:
    code = f"""
from llama_index.sparse_embeddings.poolrag import PoolragMilvusSparseEmbeddingFunction, PoolragSparseEmbedding

assert PoolragSparseEmbedding(base_url={splade_url!r}, source="model").get_query_embedding("a cat")
function = PoolragMilvusSparseEmbeddingFunction(base_url={splade_url!r}, source="model")
assert len(function.encode_documents(["a cat", "a dog"])) == 2
"""
    assert_imports_no_engine_stack(code)
