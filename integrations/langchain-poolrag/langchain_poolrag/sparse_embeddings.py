"""LangChain sparse embeddings on poolrag for ``langchain_qdrant``'s hybrid and sparse modes.

``QdrantVectorStore(..., retrieval_mode=RetrievalMode.HYBRID, sparse_embedding=...)`` takes a
``langchain_qdrant.SparseEmbeddings``; this one makes BM25 vectors from a model's tokenizer (no
second model) or runs a SPLADE / BGE-M3 model, with the same numbers as poolrag's own ingest.
"""

from __future__ import annotations

try:
    from langchain_qdrant.sparse_embeddings import SparseEmbeddings, SparseVector
except ImportError:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(  # an ImportError, naming the missing extra's module
        "PoolragSparseEmbeddings needs langchain-qdrant: pip install 'langchain-poolrag[qdrant]'",
        name="langchain_qdrant",
    ) from None

from poolrag.frameworks.fields import SparseFields
from poolrag.sparse.vector import SparseVector as PoolragSparseVector


def _qdrant_vector(vector: PoolragSparseVector) -> SparseVector:
    return SparseVector(indices=vector.indices.tolist(), values=vector.values.tolist())


class PoolragSparseEmbeddings(SparseFields, SparseEmbeddings):
    """Sparse vectors for Qdrant hybrid search, from BM25 or a sparse model.

    Example:
        .. code-block:: python

            sparse = PoolragSparseEmbeddings(model_name="sentence-transformers/all-MiniLM-L6-v2")
            sparse = PoolragSparseEmbeddings(source="model", model_name="naver/splade-v3")

    The arguments are :class:`~poolrag.frameworks.fields.SparseFields`' (``source``, BM25's
    ``avg_doc_length`` / ``k1`` / ``b`` / ``query_idf``, and where the model runs). With the default
    ``query_idf="store"``, create the Qdrant sparse field with ``modifier=Modifier.IDF``.
    """

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        return [_qdrant_vector(v) for v in self.encoder.documents(texts)]

    def embed_query(self, text: str) -> SparseVector:
        return _qdrant_vector(self.encoder.queries([text])[0])

    async def aembed_documents(self, texts: list[str]) -> list[SparseVector]:
        return [_qdrant_vector(v) for v in await self.encoder.adocuments(texts)]

    async def aembed_query(self, text: str) -> SparseVector:
        return _qdrant_vector((await self.encoder.aqueries([text]))[0])
