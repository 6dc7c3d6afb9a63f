"""LangChain ``BaseRetriever`` for ColBERT late interaction (MaxSim over per-token vectors).

The retriever owns the query side (encode the query, ask the index for ``k`` documents); the
documents live in a :class:`~integrations.colbert.MultiVectorIndex`: in memory for small corpora,
or Qdrant multivectors (:class:`~integrations.colbert.qdrant.QdrantMultiVectorIndex`) for real ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from integrations.backend_fields import BackendFields
from integrations.colbert import ColBERTSearcher, Hit, InMemoryMultiVectorIndex, MultiVectorIndex


class PoolragColBERTRetriever(BackendFields, BaseRetriever):
    """Top-``k`` documents by ColBERT MaxSim, optionally restricted by a metadata ``filter``.

    ``k`` and ``filter`` can also be given per call: ``retriever.invoke(query, k=2, filter={...})``.
    A filter maps metadata keys to a value (equality) or a list of values (any of them).

    Example:
        .. code-block:: python

            retriever = PoolragColBERTRetriever.from_texts(texts, model_name="lightonai/colbertv2.0", k=4)
            retriever.invoke("what is late interaction?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=(), extra="forbid")

    index: Any = Field(default_factory=InMemoryMultiVectorIndex, description="Where the token vectors live.")
    k: int = Field(default=4, ge=1, description="Documents to return.")
    filter: dict[str, Any] | None = Field(default=None, description="Metadata every result must match.")
    score_key: str = Field(default="score", description="Metadata key that receives the MaxSim score.")

    @field_validator("index")
    @classmethod
    def _check_index(cls, index: Any) -> Any:
        if not isinstance(index, MultiVectorIndex):
            raise ValueError(
                f"index must be a MultiVectorIndex (add/search/delete), not {type(index).__name__}"
            )
        return index

    @property
    def searcher(self) -> ColBERTSearcher:
        return ColBERTSearcher(self.backend, self.index, self.truncate_prompt_tokens)

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> PoolragColBERTRetriever:
        """A retriever over ``texts``, encoded now (in memory unless ``index=`` is given)."""
        retriever = cls(**kwargs)
        retriever.add_texts(texts, metadatas, ids)
        return retriever

    @classmethod
    def from_documents(cls, documents: Sequence[Document], **kwargs: Any) -> PoolragColBERTRetriever:
        retriever = cls(**kwargs)
        retriever.add_documents(documents)
        return retriever

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Encode and index ``texts``; returns their ids (re-adding an id replaces that document)."""
        return self.searcher.add_texts(texts, metadatas, ids)

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        return self.add_texts(*_columns(documents))

    async def aadd_documents(self, documents: Sequence[Document]) -> list[str]:
        return await self.searcher.aadd_texts(*_columns(documents))

    def delete(self, ids: Sequence[str]) -> None:
        self.index.delete(list(ids))

    def _documents(self, hits: list[Hit]) -> list[Document]:
        return [
            Document(page_content=h.text, metadata={**h.metadata, self.score_key: h.score}, id=h.id)
            for h in hits
        ]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        hits = self.searcher.search(
            query, self.k if k is None else k, self.filter if filter is None else filter
        )
        return self._documents(hits)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        hits = await self.searcher.asearch(
            query, self.k if k is None else k, self.filter if filter is None else filter
        )
        return self._documents(hits)


def _columns(documents: Sequence[Document]) -> tuple[list[str], list[dict[str, Any]], list[str] | None]:
    texts = [doc.page_content for doc in documents]
    metadatas = [dict(doc.metadata) for doc in documents]
    given = [doc.id for doc in documents]
    if all(doc_id is None for doc_id in given):
        return texts, metadatas, None
    return texts, metadatas, [str(doc_id) if doc_id else str(uuid.uuid4()) for doc_id in given]
