"""LangChain ``BaseDocumentCompressor`` that reranks with a poolrag scoring model.

Drop it into ``ContextualCompressionRetriever`` (package ``langchain-classic``) behind any
retriever. It scores every (query, document) pair in one engine call: a cross-encoder reads each
pair jointly, an embedding model uses cosine, a ColBERT model MaxSim.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import Field

from poolrag.frameworks.adapter_calls import Ranked, arerank, rerank
from poolrag.frameworks.fields import BackendFields


class PoolragReranker(BackendFields, BaseDocumentCompressor):
    """Keep the ``top_n`` documents most relevant to the query, best first.

    Each returned document is a copy whose ``metadata[score_key]`` holds its relevance score; the
    input documents are not modified.

    Example:
        .. code-block:: python

            reranker = PoolragReranker(model_name="cross-encoder/ms-marco-MiniLM-L-12-v2", top_n=3)
            retriever = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=...)
    """

    top_n: int | None = Field(default=3, ge=1, description="Documents to keep; None keeps all, reordered.")
    score_key: str = Field(default="relevance_score", description="Metadata key that receives the score.")

    def _copies(self, documents: Sequence[Document], ranked: list[Ranked]) -> list[Document]:
        return [
            Document(
                page_content=documents[i].page_content,
                metadata={**documents[i].metadata, self.score_key: score},
                id=documents[i].id,
            )
            for i, score in ranked
        ]

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Score every document against ``query`` and keep the best ``top_n``."""
        texts = [doc.page_content for doc in documents]
        return self._copies(documents, rerank(self.backend, query, texts, self._params(), self.top_n))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        texts = [doc.page_content for doc in documents]
        ranked = await arerank(self.backend, query, texts, self._params(), self.top_n)
        return self._copies(documents, ranked)
