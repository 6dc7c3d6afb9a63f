"""ColBERT retrieval without a framework: encode with the backend, store and search in an index.

Documents are encoded as documents and queries as queries (ColBERT pads and marks them
differently), each in one backend call so the engine batches them by token budget.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from integrations.backend import PoolingBackend
from integrations.colbert.index import Hit, MetadataFilter, MultiVectorIndex
from poolrag import InvalidInputError, PoolingParams

TOKEN_TASK = "token_embed"


class ColBERTSearcher:
    """Adds texts to a :class:`MultiVectorIndex` and answers top-k MaxSim queries.

    Args:
        backend: an engine or server running a ColBERT model (``token_embed`` task).
        index: where the token vectors live.
        truncate_prompt_tokens: ``-1`` cuts documents at the model's document length, as ColBERT
            does; ``None`` raises on longer ones instead.
    """

    def __init__(
        self, backend: PoolingBackend, index: MultiVectorIndex, truncate_prompt_tokens: int | None = -1
    ):
        self.backend = backend
        self.index = index
        self.truncate_prompt_tokens = truncate_prompt_tokens

    def _params(self, input_type: str) -> PoolingParams:
        return PoolingParams(input_type=input_type, truncate_prompt_tokens=self.truncate_prompt_tokens)  # type: ignore[arg-type]

    @staticmethod
    def _columns(
        texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]] | None, ids: Sequence[str] | None
    ) -> tuple[list[str], list[str], list[dict[str, Any]]]:
        texts = list(texts)
        metadatas = [dict(m or {}) for m in metadatas] if metadatas is not None else [{} for _ in texts]
        ids = [str(i) for i in ids] if ids is not None else [str(uuid.uuid4()) for _ in texts]
        if not (len(texts) == len(metadatas) == len(ids)):
            raise InvalidInputError(
                "texts, metadatas and ids must have equal lengths, "
                f"got {len(texts)}, {len(metadatas)}, {len(ids)}"
            )
        return texts, ids, metadatas

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Encode ``texts`` as documents and store them; returns their ids (new UUIDs unless given)."""
        texts, ids, metadatas = self._columns(texts, metadatas, ids)
        if not texts:
            return []
        vectors = self.backend.encode_arrays(texts, TOKEN_TASK, self._params("document"))
        self.index.add(ids, texts, vectors, metadatas)
        return ids

    async def aadd_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        texts, ids, metadatas = self._columns(texts, metadatas, ids)
        if not texts:
            return []
        vectors = await self.backend.aencode_arrays(texts, TOKEN_TASK, self._params("document"))
        await asyncio.to_thread(self.index.add, ids, texts, vectors, metadatas)
        return ids

    def encode_query(self, query: str) -> np.ndarray:
        return self.backend.encode_arrays([query], TOKEN_TASK, self._params("query"))[0]

    def search(self, query: str, k: int, filter: MetadataFilter | None = None) -> list[Hit]:
        """The ``k`` best documents for ``query`` among those matching ``filter``, best first."""
        _check_k(k)
        return self.index.search(self.encode_query(query), k, filter)

    async def asearch(self, query: str, k: int, filter: MetadataFilter | None = None) -> list[Hit]:
        _check_k(k)
        matrix = (await self.backend.aencode_arrays([query], TOKEN_TASK, self._params("query")))[0]
        return await asyncio.to_thread(self.index.search, matrix, k, filter)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
