"""LlamaIndex ``BaseSparseEmbedding`` on poolrag, and the sparse functions of its Qdrant hybrid mode.

``QdrantVectorStore(enable_hybrid=True, sparse_doc_fn=..., sparse_query_fn=...)`` takes two
callables from a list of texts to ``(indices, values)`` lists: ``encode_documents`` and
``encode_queries`` here. Vectors come from BM25 over a model's tokenizer (no second model) or from a
SPLADE / BGE-M3 model, with the same numbers as poolrag's own ingest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from llama_index.core.base.embeddings.base_sparse import BaseSparseEmbedding, SparseEmbedding
from pydantic import Field

from poolrag.frameworks.adapter_calls import check_text_list
from poolrag.frameworks.fields import SparseFields
from poolrag.frameworks.sparse_encoding import as_index_lists

DEFAULT_BATCH = 256

SparseLists = tuple[list[list[int]], list[list[float]]]
_R = TypeVar("_R")


def unspanned(method: Callable[..., _R]) -> Callable[..., _R]:
    """``method`` without LlamaIndex's ``dispatcher.span`` wrapper. Its DispatcherSpanMixin spans an
    override of a spanned method, so an override calling the spanned base would show each call as
    two nested spans of one name."""
    return getattr(method, "__wrapped__", method)


class PoolragSparseEmbedding(SparseFields, BaseSparseEmbedding):
    """Sparse vectors from BM25 or a sparse model, as dicts and as Qdrant's sparse functions.

    Example:
        .. code-block:: python

            sparse = PoolragSparseEmbedding(model_name="sentence-transformers/all-MiniLM-L6-v2")
            store = QdrantVectorStore(
                "docs", client=client, enable_hybrid=True,
                sparse_doc_fn=sparse.encode_documents, sparse_query_fn=sparse.encode_queries,
            )

    Takes :class:`~poolrag.frameworks.fields.SparseFields`' arguments, and ``embed_batch_size``
    (texts per call; LlamaIndex cuts lists into pieces this long). The Qdrant store creates its
    sparse field without ``Modifier.IDF``: create the collection first, or use ``query_idf="documents"``.
    """

    embed_batch_size: int = Field(default=DEFAULT_BATCH, gt=0, le=2048, description="Texts per call.")

    @classmethod
    def class_name(cls) -> str:
        return "PoolragSparseEmbedding"

    def encode_documents(self, texts: list[str]) -> SparseLists:
        """``sparse_doc_fn`` of LlamaIndex's ``QdrantVectorStore``."""
        return as_index_lists(self.encoder.documents(texts))

    def encode_queries(self, texts: list[str]) -> SparseLists:
        """``sparse_query_fn`` of LlamaIndex's ``QdrantVectorStore``."""
        return as_index_lists(self.encoder.queries(texts))

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[SparseEmbedding]:
        """LlamaIndex's batching, after the texts are checked whole: a bad one is named by its place
        in ``texts``, not in its ``embed_batch_size`` slice."""
        batch = unspanned(super().get_text_embedding_batch)
        return batch(check_text_list(texts, "texts"), show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[SparseEmbedding]:
        """:meth:`get_text_embedding_batch` for asyncio."""
        checked = check_text_list(texts, "texts")
        return await unspanned(super().aget_text_embedding_batch)(checked, show_progress, **kwargs)

    def _get_query_embedding(self, query: str) -> SparseEmbedding:
        return self.encoder.queries([query])[0].to_dict()

    async def _aget_query_embedding(self, query: str) -> SparseEmbedding:
        return (await self.encoder.aqueries([query]))[0].to_dict()

    def _get_text_embedding(self, text: str) -> SparseEmbedding:
        return self.encoder.documents([text])[0].to_dict()

    async def _aget_text_embedding(self, text: str) -> SparseEmbedding:
        return (await self.encoder.adocuments([text]))[0].to_dict()

    def _get_text_embeddings(self, texts: list[str]) -> list[SparseEmbedding]:
        return [v.to_dict() for v in self.encoder.documents(texts)]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[SparseEmbedding]:
        return [v.to_dict() for v in await self.encoder.adocuments(texts)]
