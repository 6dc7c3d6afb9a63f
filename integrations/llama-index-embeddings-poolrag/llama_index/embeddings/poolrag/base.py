"""LlamaIndex ``BaseEmbedding`` on poolrag: a one-line swap for ``HuggingFaceEmbedding``.

LlamaIndex cuts text lists into ``embed_batch_size`` pieces and hands each piece to
``_get_text_embeddings``; every piece goes to the engine in one call, which packs it into forward
passes by token budget. The default piece is large (256) so that packing has room to work.
"""

from __future__ import annotations

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from pydantic import Field

from poolrag.frameworks.adapter_calls import aembed_text, aembed_texts, embed_text, embed_texts
from poolrag.frameworks.fields import EmbeddingFields

DEFAULT_BATCH = 256


class PoolragEmbedding(EmbeddingFields, BaseEmbedding):
    """Embeddings from a poolrag engine in process or from ``poolrag serve``.

    Example:
        .. code-block:: python

            Settings.embed_model = PoolragEmbedding(model_name="BAAI/bge-small-en-v1.5")
            Settings.embed_model = PoolragEmbedding(base_url="http://127.0.0.1:8000")  # same vectors

    Args (besides the shared ``engine`` / ``model_name`` / ``base_url`` / ``client`` fields):
        dimensions: Matryoshka output size (the model must be a Matryoshka model).
        cache: a poolrag ``EmbeddingCache`` (or its path), or a ``CachedEmbedder`` on the same
            engine, read through before embedding.
        embed_batch_size: texts per engine call (at most 2048, LlamaIndex's bound).
    """

    embed_batch_size: int = Field(default=DEFAULT_BATCH, gt=0, le=2048, description="Texts per engine call.")

    @classmethod
    def class_name(cls) -> str:
        return "PoolragEmbedding"

    def _get_query_embedding(self, query: str) -> Embedding:
        return embed_text(self.backend, query, self._params("query"))

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await aembed_text(self.backend, query, self._params("query"))

    def _get_text_embedding(self, text: str) -> Embedding:
        return embed_text(self.backend, text, self._params("document"))

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await aembed_text(self.backend, text, self._params("document"))

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return embed_texts(self.backend, texts, self._params("document"))

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await aembed_texts(self.backend, texts, self._params("document"))
