"""LlamaIndex ``BaseNodePostprocessor`` that reranks retrieved nodes with a poolrag scoring model.

Use it as a query engine's ``node_postprocessors``. All (query, node) pairs are scored in one
engine call: a cross-encoder reads each pair jointly, an embedding model uses cosine, a ColBERT
model MaxSim.
"""

from __future__ import annotations

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import Field

from integrations.backend_fields import BackendFields
from integrations.ranking import best_first
from poolrag import InvalidInputError, PoolingParams

RETRIEVAL_SCORE_KEY = "retrieval_score"


class PoolragRerank(BackendFields, BaseNodePostprocessor):
    """Keep the ``top_n`` nodes most relevant to the query, best first, scored by the model.

    Example:
        .. code-block:: python

            rerank = PoolragRerank(model_name="cross-encoder/ms-marco-MiniLM-L-12-v2", top_n=2)
            query_engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[rerank])
    """

    top_n: int | None = Field(default=2, ge=1, description="Nodes to keep; None keeps all, reordered.")
    keep_retrieval_score: bool = Field(
        default=False, description=f"Keep the retriever's score in metadata[{RETRIEVAL_SCORE_KEY!r}]."
    )
    metadata_mode: MetadataMode = Field(
        default=MetadataMode.EMBED, description="Which metadata is scored with each node's text."
    )

    @classmethod
    def class_name(cls) -> str:
        return "PoolragRerank"

    def _params(self) -> PoolingParams:
        return PoolingParams(truncate_prompt_tokens=self.truncate_prompt_tokens)

    def _query(self, query_bundle: QueryBundle | None) -> str:
        if query_bundle is None:
            raise InvalidInputError("reranking needs the query: pass query_bundle or query_str")
        return query_bundle.query_str

    def _texts(self, nodes: list[NodeWithScore]) -> list[str]:
        return [n.node.get_content(metadata_mode=self.metadata_mode) for n in nodes]

    def _ranked(self, nodes: list[NodeWithScore], scores: list[float]) -> list[NodeWithScore]:
        ranked = []
        for i in best_first(scores, self.top_n):
            node = nodes[i].node
            if self.keep_retrieval_score:
                node = node.model_copy(
                    update={"metadata": {**node.metadata, RETRIEVAL_SCORE_KEY: nodes[i].score}}
                )
            ranked.append(NodeWithScore(node=node, score=float(scores[i])))
        return ranked

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        return self._ranked(nodes, self.backend.score_array(query, self._texts(nodes), self._params()))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        return self._ranked(nodes, await self.backend.ascore_array(query, self._texts(nodes), self._params()))
