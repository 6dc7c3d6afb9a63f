"""The sparse embedding function of LlamaIndex's ``MilvusVectorStore``, on poolrag.

``MilvusVectorStore(enable_sparse=True, sparse_embedding_function=...)`` takes an object with
``encode_documents`` / ``encode_queries`` returning token id → weight dicts. Milvus' sparse field
has no IDF modifier, so BM25 queries here default to IDF from the documents this object encoded
(``query_idf="documents"``).
"""

from __future__ import annotations

try:
    from llama_index.vector_stores.milvus.utils import BaseSparseEmbeddingFunction
except ImportError:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(  # an ImportError, naming the missing extra's module
        "PoolragMilvusSparseEmbeddingFunction needs llama-index-vector-stores-milvus: "
        "pip install 'llama-index-sparse-embeddings-poolrag[milvus]'",
        name="llama_index.vector_stores.milvus",
    ) from None

from pydantic import Field

from poolrag.frameworks.fields import SparseFields
from poolrag.frameworks.sparse_encoding import QueryIdf, QueryIdfName, as_milvus_rows


class PoolragMilvusSparseEmbeddingFunction(SparseFields, BaseSparseEmbeddingFunction):
    """Sparse vectors for Milvus hybrid search, from BM25 over a model's tokenizer or a sparse model.

    Example:
        .. code-block:: python

            sparse = PoolragMilvusSparseEmbeddingFunction(model_name="sentence-transformers/all-MiniLM-L6-v2")
            store = MilvusVectorStore(
                uri="milvus.db", dim=384, enable_sparse=True, sparse_embedding_function=sparse,
            )

    Takes :class:`~poolrag.frameworks.fields.SparseFields`' arguments. The store encodes one node at
    a time, so pass ``avg_doc_length`` (else the first document's length is pinned) and let this
    object encode the corpus before it answers queries (BM25's IDF comes from those documents).
    """

    query_idf: QueryIdfName = Field(
        default=QueryIdf.DOCUMENTS, description="BM25: IDF from the documents encoded here, or 'store'."
    )

    def encode_documents(self, documents: list[str]) -> list[dict[int, float]]:
        return as_milvus_rows(self.encoder.documents(documents))

    def encode_queries(self, queries: list[str]) -> list[dict[int, float]]:
        return [v.to_dict() for v in self.encoder.queries(queries)]

    async def async_encode_documents(self, documents: list[str]) -> list[dict[int, float]]:
        return as_milvus_rows(await self.encoder.adocuments(documents))

    async def async_encode_queries(self, queries: list[str]) -> list[dict[int, float]]:
        return [v.to_dict() for v in await self.encoder.aqueries(queries)]
