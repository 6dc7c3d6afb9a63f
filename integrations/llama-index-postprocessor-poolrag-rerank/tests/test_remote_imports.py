"""A user of a ``poolrag serve`` never loads the engine's stack: importing the package, building
PoolragRerank with ``base_url=`` and calling it imports neither torch nor transformers (seconds of
start-up, and the server's business)."""

from __future__ import annotations

from poolrag.testing.fresh_imports import assert_imports_no_engine_stack


def test_remote_reranker_imports_neither_torch_nor_transformers(cross_encoder_url: str) -> None:
    code = f"""
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.poolrag_rerank import PoolragRerank

nodes = [NodeWithScore(node=TextNode(text=text)) for text in ["Paris is in France.", "Bananas are yellow."]]
reranker = PoolragRerank(base_url={cross_encoder_url!r}, top_n=1)
assert len(reranker.postprocess_nodes(nodes, query_str="the capital of France")) == 1
"""
    assert_imports_no_engine_stack(code)
