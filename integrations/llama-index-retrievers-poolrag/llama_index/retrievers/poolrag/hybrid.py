"""LlamaIndex ``BaseRetriever`` for hybrid (dense + sparse) search of a poolrag collection.

It wraps the core :class:`poolrag.retrieval.Retriever`: the collection is one ``poolrag ingest
--hybrid`` or ``poolrag eval`` filled, in any poolrag store. Without ``fusion`` it fuses the two legs
as the collection's saved record says (``poolrag eval --tune --save``), else by the default rule; a
``fusion`` given here wins.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.retrievers.poolrag.base import Filters, check_top_k, scored_nodes, to_filter_dict

from poolrag.client import PoolragClient
from poolrag.engine_args import EngineArgs
from poolrag.frameworks.backend_resolution import adapter_backend
from poolrag.frameworks.hybrid_search import check_optional_fusion, open_hybrid
from poolrag.retrieval import Retriever, SparseQueryEncoder
from poolrag.stores import HybridFusion, VectorStore

if TYPE_CHECKING:  # an engine= given is loaded already; a server needs no torch here
    from poolrag.engine import Engine


class PoolragHybridRetriever(BaseRetriever):
    """Top-``similarity_top_k`` chunks of a poolrag collection by fused dense and sparse scores.

    Example:
        .. code-block:: python

            store = poolrag.stores.open_store("qdrant", "docs", path="./poolrag_qdrant")
            retriever = PoolragHybridRetriever(model_name="all-MiniLM-L6-v2", store=store)
            retriever.retrieve("which warehouse ships part QZ7-7749?")
    """

    def __init__(
        self,
        *,
        store: VectorStore,
        engine: Engine | None = None,
        model_name: str | os.PathLike[str] | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: PoolragClient | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        engine_args: EngineArgs | None = None,
        similarity_top_k: int = 4,
        filters: Filters | None = None,
        fusion: HybridFusion | None = None,
        sparse_encoder: SparseQueryEncoder | None = None,
        truncate_prompt_tokens: int | None = -1,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        check_top_k(similarity_top_k)
        backend = adapter_backend(
            engine=engine,
            client=client,
            model_name=model_name,
            base_url=base_url,
            api_key=api_key,
            engine_kwargs=engine_kwargs,
            engine_args=engine_args,
            task="embed",
        )
        self.fusion = check_optional_fusion(fusion)
        self.retriever: Retriever = open_hybrid(backend, store, sparse_encoder, truncate_prompt_tokens)
        self.similarity_top_k = similarity_top_k
        self.filters = filters
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def store(self) -> VectorStore:
        return self.retriever.store

    def _search(self, query_bundle: QueryBundle, query_vector: Sequence[float] | None) -> dict[str, Any]:
        """One hybrid search's arguments: the query's text and vector, and this retriever's settings."""
        return {
            "query": query_bundle.query_str,
            "mode": "hybrid",
            "k": check_top_k(self.similarity_top_k),
            "filter": to_filter_dict(self.filters),
            "fusion": self.fusion,
            "query_vector": query_vector,
        }

    # The dense leg reads a bundle as LlamaIndex's vector retrievers do: its ``embedding`` if set,
    # else the mean of its ``custom_embedding_strs``' query embeddings (a HyDE transform puts the
    # hypothetical answer there), else ``query_str``; the sparse leg always reads ``query_str``.
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector: Sequence[float] | None = query_bundle.embedding
        if vector is None and query_bundle.custom_embedding_strs:
            vector = self.retriever.embedder.embed(
                query_bundle.custom_embedding_strs, input_type="query"
            ).mean(0)
        return scored_nodes(self.retriever.search(**self._search(query_bundle, vector)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector: Sequence[float] | None = query_bundle.embedding
        if vector is None and query_bundle.custom_embedding_strs:
            strs = query_bundle.custom_embedding_strs
            vector = (await self.retriever.embedder.aembed(strs, input_type="query")).mean(0)
        return scored_nodes(await self.retriever.asearch(**self._search(query_bundle, vector)))
