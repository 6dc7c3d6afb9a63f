"""A user of a ``poolrag serve`` never loads the engine's stack: importing langchain_poolrag, building
each class with ``base_url=`` or ``client=`` and calling it imports neither torch nor transformers
(seconds of start-up, and the server's business)."""

from __future__ import annotations

from poolrag.testing.fresh_imports import assert_imports_no_engine_stack


def test_remote_classes_import_neither_torch_nor_transformers(
    minilm_url: str, cross_encoder_url: str, colbert_url: str, splade_url: str
) -> None:
    code = f"""
from langchain_core.documents import Document
from langchain_poolrag import PoolragColBERTRetriever, PoolragEmbeddings, PoolragReranker
from langchain_poolrag import PoolragSparseEmbeddings
from poolrag.client import PoolragClient

assert len(PoolragEmbeddings(base_url={minilm_url!r}).embed_query("a cat")) == 384
assert len(PoolragEmbeddings(client=PoolragClient({minilm_url!r})).embed_documents(["a cat"])) == 1
reranker = PoolragReranker(base_url={cross_encoder_url!r}, top_n=1)
docs = [Document(page_content="Paris is in France."), Document(page_content="Bananas are yellow.")]
assert len(reranker.compress_documents(docs, "the capital of France")) == 1
colbert = PoolragColBERTRetriever(base_url={colbert_url!r}, k=1)
colbert.add_texts(["Paris is in France.", "Bananas are yellow."])
assert len(colbert.invoke("the capital of France")) == 1
assert PoolragSparseEmbeddings(base_url={splade_url!r}, source="model").embed_query("a cat").indices
"""
    assert_imports_no_engine_stack(code)
