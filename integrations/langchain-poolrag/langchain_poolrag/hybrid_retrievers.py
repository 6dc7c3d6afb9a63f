"""LangChain ``BaseRetriever`` for hybrid (dense + sparse) search of a poolrag collection.

It wraps the core :class:`poolrag.retrieval.Retriever`: the collection is one ``poolrag ingest
--hybrid`` or ``poolrag eval`` filled, in any poolrag store. Without ``fusion`` it fuses the two legs
as the collection's saved record says (``poolrag eval --tune --save``), else by the default rule; a
``fusion`` given here, or per call, wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr, model_validator

from langchain_poolrag.retrievers import search_documents
from poolrag.frameworks.fields import BackendFields
from poolrag.frameworks.hybrid_search import check_optional_fusion, open_hybrid
from poolrag.retrieval import Retriever


class PoolragHybridRetriever(BackendFields, BaseRetriever):
    """Top-``k`` chunks of a poolrag collection by fused dense and sparse scores.

    ``k``, ``filter`` and ``fusion`` can also be given per call: ``retriever.invoke(query, k=2)``.

    Example:
        .. code-block:: python

            store = poolrag.stores.open_store("milvus", "docs", uri="./poolrag_milvus.db")
            retriever = PoolragHybridRetriever(model_name="all-MiniLM-L6-v2", store=store)
            retriever.invoke("which warehouse ships part QZ7-7749?")
    """

    model_config = BackendFields.model_config
    _task: ClassVar[str | None] = "embed"

    store: Any = Field(description="The poolrag store holding the collection (poolrag.stores.open_store).")
    k: int = Field(default=4, ge=1, description="Chunks to return.")
    filter: dict[str, Any] | None = Field(default=None, description="Metadata every result must match.")
    fusion: Any = Field(
        default=None,
        description="'rrf', 'dbsf', ('adaptive', w), ('minmax', w) or ('weighted', w), w the sparse leg's "
        "share; default: the collection's saved setting (poolrag eval --tune --save), else the default rule.",
    )
    sparse_encoder: Any = Field(
        default=None,
        exclude=True,
        description="Query sparse vectors (default: BM25 over the model's tokenizer, for bm25 collections).",
    )
    score_key: str = Field(default="score", description="Metadata key that receives the fused score.")

    _retriever: Retriever = PrivateAttr()

    @model_validator(mode="after")
    def _open_collection(self) -> Any:
        self.fusion = check_optional_fusion(self.fusion)
        truncate = self.truncate_prompt_tokens
        self._retriever = open_hybrid(self.backend, self.store, self.sparse_encoder, truncate)
        return self

    @property
    def retriever(self) -> Retriever:
        """The core retriever this class wraps (its ``saved`` record, search results with all scores)."""
        return self._retriever

    def _per_call(self, k: int | None, filter: Mapping[str, Any] | None, fusion: Any) -> dict[str, Any]:
        """A hybrid search's ``k``, ``filter`` and ``fusion``: the call's, or the retriever's own where the
        call gives none."""
        return {
            "mode": "hybrid",
            "k": self.k if k is None else k,
            "filter": self.filter if filter is None else filter,
            "fusion": self.fusion if fusion is None else check_optional_fusion(fusion),
        }

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Any = None,
    ) -> list[Document]:
        results = self._retriever.search(query, **self._per_call(k, filter, fusion))
        return search_documents(results, self.score_key)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Any = None,
    ) -> list[Document]:
        results = await self._retriever.asearch(query, **self._per_call(k, filter, fusion))
        return search_documents(results, self.score_key)
