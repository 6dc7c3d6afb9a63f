"""LangChain ``BaseRetriever`` for ColBERT late interaction (MaxSim over per-token vectors).

It wraps poolrag's one ColBERT stack (:class:`poolrag.retrieval.ColbertRetriever`): documents live in
any poolrag store, in memory by default, or Qdrant / Milvus from :func:`poolrag.stores.open_store`
(collections that ``poolrag ingest`` filled are searchable as they are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr, model_validator

from poolrag.frameworks.colbert_search import open_colbert
from poolrag.frameworks.fields import BackendFields
from poolrag.retrieval import ColbertRetriever, SearchResult


def search_documents(results: Sequence[SearchResult], score_key: str) -> list[Document]:
    """LangChain documents of search hits: the chunk's text, its record's fields and position, and
    its score under ``score_key``; the chunk's id as the document's."""
    return [
        Document(page_content=r.text, metadata={**r.metadata, **r.position, score_key: r.score}, id=r.id)
        for r in results
    ]


class PoolragColBERTRetriever(BackendFields, BaseRetriever):
    """Top-``k`` documents by ColBERT MaxSim, optionally restricted by a metadata ``filter``.

    ``k`` and ``filter`` can also be given per call: ``retriever.invoke(query, k=2, filter={...})``.
    A filter maps metadata keys to a value (equality) or a list of values (any of them).

    Example:
        .. code-block:: python

            retriever = PoolragColBERTRetriever.from_texts(texts, model_name="lightonai/colbertv2.0", k=4)
            retriever.invoke("what is late interaction?")
    """

    # BaseRetriever allows unknown fields; a misspelt option (top_k=) must not be ignored.
    model_config = BackendFields.model_config
    _task: ClassVar[str | None] = "token_embed"

    store: Any = Field(
        default=None, description="A poolrag store holding the token vectors (default: a new in-memory one)."
    )
    k: int = Field(default=4, ge=1, description="Documents to return.")
    filter: dict[str, Any] | None = Field(default=None, description="Metadata every result must match.")
    score_key: str = Field(default="score", description="Metadata key that receives the MaxSim score.")

    _colbert: ColbertRetriever = PrivateAttr()

    @model_validator(mode="after")
    def _open_collection(self) -> Any:
        self._colbert = open_colbert(self.backend, self.store, self.truncate_prompt_tokens)
        self.store = self._colbert.store
        return self

    @property
    def colbert(self) -> ColbertRetriever:
        """The core retriever this class wraps (the store, counts, search results with all scores)."""
        return self._colbert

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> PoolragColBERTRetriever:
        """A retriever over ``texts``, encoded now (in memory unless ``store=`` is given)."""
        retriever = cls(**kwargs)
        retriever.add_texts(texts, metadatas, ids)
        return retriever

    @classmethod
    def from_documents(cls, documents: Sequence[Document], **kwargs: Any) -> PoolragColBERTRetriever:
        """A retriever over ``documents``, encoded now (in memory unless ``store=`` is given)."""
        retriever = cls(**kwargs)
        retriever.add_documents(documents)
        return retriever

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Encode and store ``texts``; returns their ids (re-adding an id replaces that document;
        without ids, the same text with the same metadata gets the same id)."""
        return self._colbert.add_texts(texts, metadatas, ids)

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Encode and store ``documents`` under their ``id`` (re-adding an id replaces that document;
        a document without one gets its content's id); returns the ids."""
        return self._colbert.add_texts(*_columns(documents))

    async def aadd_documents(self, documents: Sequence[Document]) -> list[str]:
        """:meth:`add_documents` for asyncio."""
        return await self._colbert.aadd_texts(*_columns(documents))

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the documents with these ids from the store."""
        self._colbert.delete(list(ids))

    def _per_call(
        self, k: int | None, filter: Mapping[str, Any] | None
    ) -> tuple[int, Mapping[str, Any] | None]:
        """The call's ``k`` and ``filter``, or the retriever's own where the call gives none."""
        return (self.k if k is None else k), (self.filter if filter is None else filter)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        k, filter = self._per_call(k, filter)
        return search_documents(self._colbert.search(query, k, filter=filter), self.score_key)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        k, filter = self._per_call(k, filter)
        return search_documents(await self._colbert.asearch(query, k, filter=filter), self.score_key)


def _columns(documents: Sequence[Document]) -> tuple[list[str], list[dict[str, Any]], list[str | None]]:
    """Texts, metadata and ids; a document without an id gets its content id in the core (the same
    chunk twice, a repeated header, is one document rather than an error)."""
    texts = [doc.page_content for doc in documents]
    metadatas = [dict(doc.metadata) for doc in documents]
    return texts, metadatas, [str(doc.id) if doc.id else None for doc in documents]
