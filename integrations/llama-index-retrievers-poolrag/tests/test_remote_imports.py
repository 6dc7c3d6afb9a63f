"""A user of a ``poolrag serve`` never loads the engine's stack: importing the package, building
PoolragColBERTRetriever with ``base_url=`` and calling it imports neither torch nor transformers
(seconds of start-up, and the server's business)."""

from __future__ import annotations

from poolrag.testing.fresh_imports import assert_imports_no_engine_stack


def test_remote_retriever_imports_neither_torch_nor_transformers(colbert_url: str) -> None:
    code = f"""
from llama_index.core.schema import TextNode
from llama_index.retrievers.poolrag import PoolragColBERTRetriever

retriever = PoolragColBERTRetriever(base_url={colbert_url!r}, similarity_top_k=1)
retriever.add_nodes([TextNode(text="Paris is in France."), TextNode(text="Bananas are yellow.")])
assert len(retriever.retrieve("the capital of France")) == 1
"""
    assert_imports_no_engine_stack(code)
