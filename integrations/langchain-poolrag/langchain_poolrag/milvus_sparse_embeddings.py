"""LangChain sparse embeddings on poolrag for the sparse field of ``langchain_milvus.Milvus``.

Milvus takes a ``BaseSparseEmbedding`` (token id → weight dicts) next to a dense embedding for
hybrid search. Its sparse field has no IDF modifier, so BM25 queries here default to IDF from the
documents this object embedded (``query_idf="documents"``).
"""

from __future__ import annotations

try:
    from langchain_milvus.utils.sparse import BaseSparseEmbedding
except ImportError:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(  # an ImportError, naming the missing extra's module
        "PoolragMilvusSparseEmbedding needs langchain-milvus: pip install 'langchain-poolrag[milvus]'",
        name="langchain_milvus",
    ) from None

from pydantic import Field

from poolrag.frameworks.fields import SparseFields
from poolrag.frameworks.sparse_encoding import QueryIdf, QueryIdfName, as_milvus_rows


class PoolragMilvusSparseEmbedding(SparseFields, BaseSparseEmbedding):
    """Sparse vectors for Milvus hybrid search, from BM25 or a sparse model.

    Example:
        .. code-block:: python

            sparse = PoolragMilvusSparseEmbedding(model_name="sentence-transformers/all-MiniLM-L6-v2")
            store = Milvus(embedding_function=[dense, sparse], vector_field=["dense", "sparse"], ...)

    Takes the arguments of :class:`~langchain_poolrag.PoolragSparseEmbeddings`. BM25's IDF comes from
    the documents embedded by this object (in this process): embed the corpus with it before querying.
    """

    query_idf: QueryIdfName = Field(
        default=QueryIdf.DOCUMENTS, description="BM25: IDF from the documents embedded here, or 'store'."
    )

    def embed_documents(self, texts: list[str]) -> list[dict[int, float]]:
        return as_milvus_rows(self.encoder.documents(texts))

    def embed_query(self, query: str) -> dict[int, float]:
        return self.encoder.queries([query])[0].to_dict()

    async def aembed_documents(self, texts: list[str]) -> list[dict[int, float]]:
        return as_milvus_rows(await self.encoder.adocuments(texts))

    async def aembed_query(self, query: str) -> dict[int, float]:
        return (await self.encoder.aqueries([query]))[0].to_dict()
