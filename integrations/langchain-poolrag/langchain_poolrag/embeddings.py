"""LangChain ``Embeddings`` on poolrag: a one-line swap for ``HuggingFaceEmbeddings``.

``embed_documents`` hands the whole list to the engine in one call (it batches by token budget, not
by a fixed count), documents and queries get the model's own document and query prompts, and
Matryoshka models can return shorter vectors via ``dimensions``.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from poolrag.frameworks.adapter_calls import aembed_text, aembed_texts, embed_text, embed_texts
from poolrag.frameworks.fields import EmbeddingFields


class PoolragEmbeddings(EmbeddingFields, Embeddings):
    """Embeddings from a poolrag engine in process or from ``poolrag serve``.

    Example:
        .. code-block:: python

            embeddings = PoolragEmbeddings(model_name="sentence-transformers/all-MiniLM-L6-v2")
            embeddings = PoolragEmbeddings(base_url="http://127.0.0.1:8000")  # same vectors, remote

    Args (besides the shared ``engine`` / ``model_name`` / ``base_url`` / ``client`` fields):
        dimensions: Matryoshka output size (the model must be a Matryoshka model).
        cache: a poolrag ``EmbeddingCache`` (or its path), or a ``CachedEmbedder`` on the same
            engine; unchanged texts are then read from disk instead of being embedded again.
    """

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed search documents (with the model's document prompt, if it has one)."""
        return embed_texts(self.backend, texts, self._params("document"))

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (with the model's query prompt, if it has one)."""
        return embed_text(self.backend, text, self._params("query"))

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await aembed_texts(self.backend, texts, self._params("document"))

    async def aembed_query(self, text: str) -> list[float]:
        return await aembed_text(self.backend, text, self._params("query"))
