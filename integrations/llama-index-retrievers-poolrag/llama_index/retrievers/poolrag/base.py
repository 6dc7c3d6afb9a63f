"""LlamaIndex ``BaseRetriever`` for ColBERT late interaction (MaxSim over per-token vectors).

It wraps poolrag's one ColBERT stack (:class:`poolrag.retrieval.ColbertRetriever`): nodes are encoded
as documents into any poolrag store (in memory by default, or Qdrant / Milvus from
:func:`poolrag.stores.open_store`), a query is encoded as a query, and the store returns the
``similarity_top_k`` best nodes that pass ``filters``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    BaseNode,
    ImageNode,
    IndexNode,
    MetadataMode,
    NodeWithScore,
    QueryBundle,
    TextNode,
)
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from poolrag.client import PoolragClient
from poolrag.counts import check_count
from poolrag.engine_args import EngineArgs
from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.frameworks.backend_resolution import adapter_backend
from poolrag.frameworks.colbert_search import open_colbert
from poolrag.retrieval import ColbertRetriever, SearchResult
from poolrag.stores import VectorStore

if TYPE_CHECKING:  # an engine= given is loaded already; a server needs no torch here
    from poolrag.engine import Engine

Filters = MetadataFilters | Mapping[str, Any]


logger = logging.getLogger(__name__)


class PoolragColBERTRetriever(BaseRetriever):
    """Top-``similarity_top_k`` nodes by ColBERT MaxSim, optionally restricted by metadata filters.

    ``filters`` takes LlamaIndex ``MetadataFilters`` combined with AND, using the ``==`` and ``in``
    operators (what every store can evaluate exactly), or a plain ``{key: value or [values]}``.
    The text that is encoded and returned is each node's content without metadata.

    Example:
        .. code-block:: python

            retriever = PoolragColBERTRetriever(model_name="lightonai/colbertv2.0", similarity_top_k=4)
            retriever.add_nodes(nodes)
            retriever.retrieve("what is late interaction?")
    """

    def __init__(
        self,
        *,
        engine: Engine | None = None,
        model_name: str | os.PathLike[str] | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: PoolragClient | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        engine_args: EngineArgs | None = None,
        store: VectorStore | None = None,
        similarity_top_k: int = 4,
        filters: Filters | None = None,
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
            task="token_embed",
        )
        self.colbert: ColbertRetriever = open_colbert(backend, store, truncate_prompt_tokens)
        self.similarity_top_k = similarity_top_k
        self.filters = filters
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def store(self) -> VectorStore:
        """The poolrag store holding the nodes' token vectors."""
        return self.colbert.store

    def add_nodes(self, nodes: Sequence[BaseNode]) -> list[str]:
        """Encode and store ``nodes`` under their ``node_id`` (re-adding a node replaces it)."""
        return self.colbert.add_texts(*_columns(nodes))

    async def aadd_nodes(self, nodes: Sequence[BaseNode]) -> list[str]:
        """:meth:`add_nodes` for asyncio."""
        return await self.colbert.aadd_texts(*_columns(nodes))

    def delete_nodes(self, node_ids: Sequence[str]) -> None:
        """Remove the nodes with these ``node_id`` s from the store."""
        self.colbert.delete(list(node_ids))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        filters = to_filter_dict(self.filters)
        k = check_top_k(self.similarity_top_k)
        return scored_nodes(self.colbert.search(query_bundle.query_str, k, filter=filters))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        filters = to_filter_dict(self.filters)
        k = check_top_k(self.similarity_top_k)
        return scored_nodes(await self.colbert.asearch(query_bundle.query_str, k, filter=filters))


def check_top_k(similarity_top_k: object) -> int:
    """``similarity_top_k`` checked when the retriever is built and again at each search, since
    LlamaIndex code sets it as an attribute (``retriever.similarity_top_k = 10``): a bad value is
    named as the user wrote it, not as the store's ``k``, and ``None`` is refused at construction
    rather than at the first search."""
    return check_count(similarity_top_k, "similarity_top_k")


def to_filter_dict(filters: Filters | None) -> dict[str, Any] | None:
    """LlamaIndex ``MetadataFilters`` (AND of ``==`` / ``in``) as poolrag's ``{key: value}`` filter."""
    if filters is None:
        return None
    if isinstance(filters, Mapping):
        return dict(filters)
    if not isinstance(filters, MetadataFilters):
        raise InvalidInputError(f"filters must be MetadataFilters or a mapping, not {type(filters).__name__}")
    if filters.condition not in (None, FilterCondition.AND) and len(filters.filters) > 1:
        raise InvalidInputError(f"poolrag filters combine conditions with AND only, not {filters.condition}")
    out: dict[str, Any] = {}
    for item in filters.filters:
        if not isinstance(item, MetadataFilter):
            raise InvalidInputError("nested MetadataFilters are not supported by poolrag's retrievers")
        if item.operator == FilterOperator.EQ:
            value: Any = item.value
        elif item.operator == FilterOperator.IN:
            value = list(item.value) if isinstance(item.value, (list, tuple)) else [item.value]
        else:
            raise InvalidInputError(
                f"poolrag's retrievers filter with '==' and 'in' only, not {item.operator.value!r}"
            )
        if item.key in out:
            raise InvalidInputError(f"two filters on {item.key!r}; combine them into one 'in' filter")
        out[item.key] = value
    return out


#: The payload field where LlamaIndex's vector stores keep a node's JSON (relationships, exclusion
#: lists, offsets, templates); the same field here, so a node comes back as it went in.
NODE_CONTENT = "_node_content"
NODE_TYPE = "_node_type"


def _columns(nodes: Sequence[BaseNode]) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """Texts, and each node's metadata with its JSON beside it as LlamaIndex's stores write it (the
    metadata stays top-level, so filters read it). Anything but a list of nodes is refused by name:
    a bare node iterates as its fields and a string has no content to read."""
    if isinstance(nodes, (BaseNode, str)):
        raise InputTypeError(f"nodes must be a list of LlamaIndex nodes, not one {type(nodes).__name__}")
    for i, node in enumerate(nodes):
        if not isinstance(node, BaseNode):
            raise InputTypeError(
                f"nodes[{i}] must be a LlamaIndex node (TextNode, Document), not {type(node).__name__}"
            )
    texts = [node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes]
    metadatas = [node_to_metadata_dict(node, remove_text=True, flat_metadata=False) for node in nodes]
    return texts, metadatas, [node.node_id for node in nodes]


#: the node classes a stored node is rebuilt as, by the ``_node_type`` LlamaIndex's stores write
#: (``class_name()``): a fixed table, so the stored name picks among these and imports nothing
NODE_CLASSES: dict[str, type[TextNode]] = {cls.class_name(): cls for cls in (TextNode, IndexNode, ImageNode)}


def scored_nodes(results: Sequence[SearchResult]) -> list[NodeWithScore]:
    """Search hits as LlamaIndex's scored nodes: each :func:`result_node` with its hit's score."""
    return [NodeWithScore(node=result_node(r), score=r.score) for r in results]


def result_node(result: SearchResult) -> BaseNode:
    """The node a search result stands for: rebuilt from the JSON ``add_nodes`` stored beside it as
    its own class, as LlamaIndex's vector stores rebuild it (an ``IndexNode`` keeps the ``index_id``
    a ``RecursiveRetriever`` follows; any other name is a ``TextNode``), else one of the text and
    metadata (a collection filled by ``poolrag ingest``, with each chunk's characters in its
    document, or JSON that does not parse)."""
    stored = result.metadata.get(NODE_CONTENT)
    if isinstance(stored, str):
        node_class = NODE_CLASSES.get(str(result.metadata.get(NODE_TYPE)), TextNode)
        try:
            node = node_class.from_json(stored)
        except ValueError as exc:  # pydantic's ValidationError and json's errors are ValueErrors
            logger.warning(
                "result %s: its stored node does not parse (%s); returning its text", result.id, exc
            )
        else:
            node.set_content(result.text)
            return node
    return TextNode(
        id_=result.id,
        text=result.text,
        metadata=result.metadata,
        start_char_idx=result.position.get("start"),
        end_char_idx=result.position.get("end"),
    )
