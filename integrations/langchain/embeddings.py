"""LangChain ``Embeddings`` on poolrag: a one-line swap for ``HuggingFaceEmbeddings``.

``embed_documents`` hands the whole list to the engine in one call (it batches by token budget, not
by a fixed count), documents and queries get the model's own document and query prompts, and
Matryoshka models can return shorter vectors via ``dimensions``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import Field

from integrations.backend_fields import BackendFields
from poolrag import InputTypeError, PoolingParams


class PoolragEmbeddings(BackendFields, Embeddings):
    """Embeddings from a poolrag engine in process or from ``poolrag serve``.

    Example:
        .. code-block:: python

            embeddings = PoolragEmbeddings(model_name="sentence-transformers/all-MiniLM-L6-v2")
            embeddings = PoolragEmbeddings(base_url="http://127.0.0.1:8000")  # same vectors, remote

    Args (besides the shared ``engine`` / ``model_name`` / ``base_url`` / ``client`` fields):
        dimensions: Matryoshka output size (the model must be a Matryoshka model).
        cache: a poolrag ``CachedEmbedder`` on the same engine; unchanged texts are then read
            from disk instead of being embedded again.
    """

    dimensions: int | None = Field(default=None, description="Matryoshka output size.")
    cache: Any = Field(
        default=None, exclude=True, repr=False, description="poolrag CachedEmbedder to read through."
    )

    def _params(self, input_type: str) -> PoolingParams:
        return PoolingParams(
            dimensions=self.dimensions,
            truncate_prompt_tokens=self.truncate_prompt_tokens,
            input_type=input_type,  # type: ignore[arg-type]
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed search documents (with the model's document prompt, if it has one)."""
        return _as_lists(self.backend.embed_array(_texts(texts), self._params("document")))

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (with the model's query prompt, if it has one)."""
        return _as_lists(self.backend.embed_array([_text(text)], self._params("query")))[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return _as_lists(await self.backend.aembed_array(_texts(texts), self._params("document")))

    async def aembed_query(self, text: str) -> list[float]:
        return _as_lists(await self.backend.aembed_array([_text(text)], self._params("query")))[0]


def _text(text: Any) -> str:
    if not isinstance(text, str):
        raise InputTypeError(f"the query must be a string, not {type(text).__name__}")
    return text


def _texts(texts: Any) -> list[str]:
    # A bare string would otherwise be embedded one character at a time.
    if isinstance(texts, str):
        raise InputTypeError("embed_documents takes a list of strings; use embed_query for one text")
    return list(texts)


def _as_lists(vectors: np.ndarray) -> list[list[float]]:
    return vectors.tolist()  # Python floats hold float32 values exactly
