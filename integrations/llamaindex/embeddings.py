"""LlamaIndex ``BaseEmbedding`` on poolrag: a one-line swap for ``HuggingFaceEmbedding``.

LlamaIndex cuts text lists into ``embed_batch_size`` pieces and hands each piece to
``_get_text_embeddings``; every piece goes to the engine in one call, which packs it into forward
passes by token budget. The default piece is large (256) so that packing has room to work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from pydantic import Field

from integrations.backend_fields import BackendFields
from poolrag import InputTypeError, PoolingParams

DEFAULT_BATCH = 256


class PoolragEmbedding(BackendFields, BaseEmbedding):
    """Embeddings from a poolrag engine in process or from ``poolrag serve``.

    Example:
        .. code-block:: python

            Settings.embed_model = PoolragEmbedding(model_name="BAAI/bge-small-en-v1.5")
            Settings.embed_model = PoolragEmbedding(base_url="http://127.0.0.1:8000")  # same vectors

    Args (besides the shared ``engine`` / ``model_name`` / ``base_url`` / ``client`` fields):
        dimensions: Matryoshka output size (the model must be a Matryoshka model).
        cache: a poolrag ``CachedEmbedder`` on the same engine, read through before embedding.
        embed_batch_size: texts per engine call (at most 2048, LlamaIndex's bound).
    """

    embed_batch_size: int = Field(default=DEFAULT_BATCH, gt=0, le=2048, description="Texts per engine call.")
    dimensions: int | None = Field(default=None, description="Matryoshka output size.")
    cache: Any = Field(
        default=None, exclude=True, repr=False, description="poolrag CachedEmbedder to read through."
    )

    @classmethod
    def class_name(cls) -> str:
        return "PoolragEmbedding"

    def _params(self, input_type: str) -> PoolingParams:
        return PoolingParams(
            dimensions=self.dimensions,
            truncate_prompt_tokens=self.truncate_prompt_tokens,
            input_type=input_type,  # type: ignore[arg-type]
        )

    def _get_query_embedding(self, query: str) -> Embedding:
        return _as_lists(self.backend.embed_array([_text(query)], self._params("query")))[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return _as_lists(await self.backend.aembed_array([_text(query)], self._params("query")))[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([_text(text)])[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aget_text_embeddings([_text(text)]))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return _as_lists(self.backend.embed_array(_texts(texts), self._params("document")))

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return _as_lists(await self.backend.aembed_array(_texts(texts), self._params("document")))


def _text(text: Any) -> str:
    if not isinstance(text, str):
        raise InputTypeError(f"the text must be a string, not {type(text).__name__}")
    return text


def _texts(texts: Any) -> list[str]:
    if isinstance(texts, str):
        raise InputTypeError("expected a list of strings, got one string")
    return list(texts)


def _as_lists(vectors: np.ndarray) -> list[list[float]]:
    return vectors.tolist()  # Python floats hold float32 values exactly
