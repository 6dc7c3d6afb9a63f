"""LlamaIndex ``BaseNodePostprocessor`` that reranks retrieved nodes with a poolrag scoring model.

Use it as a query engine's ``node_postprocessors``. All (query, node) pairs are scored in one
engine call: a cross-encoder reads each pair jointly, an embedding model uses cosine, a ColBERT
model MaxSim.

By default each node's score is the model's own and the order is the model's, as
``SentenceTransformerRerank`` gives them. ``second_stage="fuse"`` mixes in the retriever's scores
instead: each node's retrieval score and the model's are z-scored over the query's nodes and mixed
(``rerank_weight`` is the model's share); nodes that arrive without scores are fused by order
(reciprocal rank). The shared rule, and the measurements behind the option, are in
:mod:`poolrag.frameworks.ranking`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import Field, model_validator

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.frameworks.fields import (
    HUGGINGFACE_CACHE_FOLDER,
    HUGGINGFACE_ENGINE_OPTIONS,
    with_huggingface_options,
)
from poolrag.frameworks.ranking import Ranked, RerankerFields
from poolrag.params import InputType, PoolingParams

if TYPE_CHECKING:
    from dataclasses import InitVar

RETRIEVAL_SCORE_KEY = "retrieval_score"
#: the length ``SentenceTransformerRerank`` builds its ``CrossEncoder`` with
SENTENCE_TRANSFORMER_MAX_LENGTH = 512

dispatcher = get_dispatcher(__name__)
#: what ``cross_encoder_kwargs`` may hold: the arguments of ``CrossEncoder`` that mean something here
_CROSS_ENCODER_ARGUMENTS = ("max_length", "trust_remote_code", "revision", "token", HUGGINGFACE_CACHE_FOLDER)


def _cross_encoder_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``SentenceTransformerRerank``'s ``cross_encoder_kwargs`` as this class's arguments; the
    model and device are refused there as it refuses them, another argument by name."""
    if "device" in kwargs or "model" in kwargs:
        raise InvalidInputError("give device and model as arguments, not in cross_encoder_kwargs")
    unknown = sorted(set(kwargs) - set(_CROSS_ENCODER_ARGUMENTS))
    if unknown:
        raise InvalidInputError(
            f"cross_encoder_kwargs: {', '.join(unknown)} not taken here; it takes "
            f"{', '.join(_CROSS_ENCODER_ARGUMENTS)}"
        )
    return dict(kwargs)


class PoolragRerank(RerankerFields, BaseNodePostprocessor):
    """Keep the ``top_n`` nodes most relevant to the query, best first; each node's score is the
    model's (with ``second_stage="fuse"``, the fused score).

    Example:
        .. code-block:: python

            rerank = PoolragRerank(model_name="cross-encoder/ms-marco-MiniLM-L-12-v2", top_n=2)
            query_engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[rerank])

    ``SentenceTransformerRerank``'s own arguments run unchanged: ``model=`` (as ``model_name``),
    ``device=``, ``cache_folder=``, ``cross_encoder_kwargs=`` (its ``max_length``,
    ``trust_remote_code``, ``revision``), ``top_n`` (``0`` keeps none) and ``keep_retrieval_score``.
    Each (query, node) pair is cut at ``max_length`` = 512 tokens as its ``CrossEncoder`` cuts them
    (at most the model's length); ``max_length=None`` reads pairs up to the model's own length (a
    long-context reranker such as bge-reranker-v2-m3 then reads whole 1024-token nodes).
    """

    top_n: int | None = Field(default=2, ge=0, description="Nodes to keep; None keeps all, reordered.")
    keep_retrieval_score: bool = Field(
        default=False, description=f"Keep the retriever's score in metadata[{RETRIEVAL_SCORE_KEY!r}]."
    )
    metadata_mode: MetadataMode = Field(
        default=MetadataMode.EMBED, description="Which metadata is scored with each node's text."
    )
    max_length: int | None = Field(
        default=SENTENCE_TRANSFORMER_MAX_LENGTH,
        ge=1,
        description="Tokens each (query, node) pair keeps, as SentenceTransformerRerank cuts them (at most "
        "the model's length); None: the model's length. An explicit truncate_prompt_tokens wins.",
    )
    if TYPE_CHECKING:  # SentenceTransformerRerank's arguments, so that a checker takes its code too: not
        # fields, _sentence_transformer_arguments turns them into model_name and engine options
        model: str | None = None  # and read back as model_name (the property below)
        device: InitVar[str | None] = None
        trust_remote_code: InitVar[bool] = False
        revision: InitVar[str | None] = None
        token: InitVar[bool | str | None] = None
        cache_folder: InitVar[str | None] = None
        cross_encoder_kwargs: InitVar[dict[str, Any] | None] = None

    @model_validator(mode="before")
    @classmethod
    def _sentence_transformer_arguments(cls, data: Any) -> Any:
        """``SentenceTransformerRerank``'s arguments, so code written for it runs with the class name
        swapped: ``model`` is ``model_name``; ``device``, ``cache_folder`` and ``trust_remote_code``
        are engine options; ``cross_encoder_kwargs`` gives ``max_length`` and the engine options
        its ``CrossEncoder`` takes (``trust_remote_code``, ``revision``, ``cache_folder``)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "model" in data:
            model = data.pop("model")
            if data.get("model_name") not in (None, model):
                raise InvalidInputError("model and model_name disagree; give one")
            data["model_name"] = model
        data.update(_cross_encoder_arguments(data.pop("cross_encoder_kwargs", None) or {}))
        names = (*HUGGINGFACE_ENGINE_OPTIONS, HUGGINGFACE_CACHE_FOLDER)
        options = {name: data.pop(name) for name in names if name in data}
        return with_huggingface_options(data, options, None)

    @classmethod
    def class_name(cls) -> str:
        return "PoolragRerank"

    if not TYPE_CHECKING:  # a checker reads the declaration above (a constructor argument too)

        @property
        def model(self) -> str | None:
            """``SentenceTransformerRerank``'s field for the model's name (``model_name`` here), so
            code that reads it, such as a trace's or a log line's label, runs with the class name swapped."""
            return self.model_name

    def _params(self, input_type: InputType | None = None) -> PoolingParams:
        """The shared cut (``truncate_prompt_tokens``), or at its default ``max_length`` (a backend
        reads a cut past the model's length as the model's length)."""
        params = super()._params(input_type)
        if self.max_length is None or self.truncate_prompt_tokens != -1:
            return params
        return params.with_updates(truncate_prompt_tokens=self.max_length)

    def _query_and_texts(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[QueryBundle, list[str]]:
        """The query and each node's text, once both are what LlamaIndex hands a postprocessor: the
        mix-ups it makes easy (a string as ``query_bundle``, a parser's nodes not yet scored) are
        named, where reading them failed on a missing attribute (``'TextNode' object has no
        attribute 'node'``), as in ``SentenceTransformerRerank``."""
        if query_bundle is None:
            raise InvalidInputError("reranking needs the query: pass query_bundle or query_str")
        if not isinstance(query_bundle, QueryBundle):
            raise InputTypeError(
                f"query_bundle must be a QueryBundle, not {type(query_bundle).__name__}; "
                "pass a string as query_str="
            )
        for i, node in enumerate(nodes):
            if not isinstance(node, NodeWithScore):
                raise InputTypeError(
                    f"nodes[{i}] is a {type(node).__name__}, not a NodeWithScore (what a retriever "
                    "returns); wrap it: NodeWithScore(node=...)"
                )
        return query_bundle, [n.node.get_content(metadata_mode=self.metadata_mode) for n in nodes]

    def _scored(self, nodes: list[NodeWithScore], ranked: list[Ranked]) -> list[NodeWithScore]:
        out = []
        for r in ranked:
            node = nodes[r.index].node
            if self.keep_retrieval_score:  # a copy: the retriever's nodes stay as they were
                node = node.model_copy(
                    update={"metadata": {**node.metadata, RETRIEVAL_SCORE_KEY: nodes[r.index].score}}
                )
            out.append(NodeWithScore(node=node, score=r.score))
        return out

    @staticmethod
    def _first_stage_scores(nodes: list[NodeWithScore]) -> list[float] | None:
        """The retriever's scores, or None (fuse by order) when any node came without one."""
        scores = [n.score for n in nodes]
        return None if any(s is None for s in scores) else [float(s) for s in scores]

    @contextmanager
    def _reranking(
        self, nodes: list[NodeWithScore], query: QueryBundle
    ) -> Iterator[Callable[[list[NodeWithScore]], list[NodeWithScore]]]:
        """LlamaIndex's reranking events around one call, as its own rerankers emit them (the
        instrumentation dispatcher's and the callback manager's), so tracing shows this step.
        Yields the function that closes them with the reranked nodes."""
        model = self.model_name or "poolrag"
        top_n = len(nodes) if self.top_n is None else self.top_n
        # the QueryBundle, as sentence-transformers' and ColBERT's rerankers send it
        dispatcher.event(ReRankStartEvent(query=query, nodes=nodes, top_n=top_n, model_name=model))
        payload = {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: model,
            EventPayload.QUERY_STR: query.query_str,
            EventPayload.TOP_K: top_n,
        }
        with self.callback_manager.event(CBEventType.RERANKING, payload=payload) as event:

            def finish(reranked: list[NodeWithScore]) -> list[NodeWithScore]:
                event.on_end(payload={EventPayload.NODES: reranked})
                dispatcher.event(ReRankEndEvent(nodes=reranked))
                return reranked

            yield finish

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts = self._query_and_texts(nodes, query_bundle)
        if not nodes:
            return []
        with self._reranking(nodes, query) as finish:
            ranked = self._rank(query.query_str, texts, self._first_stage_scores(nodes))
            return finish(self._scored(nodes, ranked))

    # LlamaIndex spans only the sync ``_postprocess_nodes`` (its base's async call runs that in a
    # thread); the native async call opens its own, where tracers hang the reranking events
    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts = self._query_and_texts(nodes, query_bundle)
        if not nodes:
            return []
        with self._reranking(nodes, query) as finish:
            ranked = await self._arank(query.query_str, texts, self._first_stage_scores(nodes))
            return finish(self._scored(nodes, ranked))
