"""LangChain ``BaseDocumentCompressor`` that reranks with a poolrag scoring model.

Drop it into ``ContextualCompressionRetriever`` (package ``langchain-classic``) behind any
retriever. It scores every (query, document) pair in one engine call: a cross-encoder reads each
pair jointly, an embedding model uses cosine, a ColBERT model MaxSim.

By default it returns the model's order with the model's score in ``metadata["relevance_score"]``,
as ``CrossEncoderReranker`` and ``CohereRerank`` do. ``second_stage="fuse"`` fuses the model's order
with the retriever's instead: LangChain hands a compressor documents without their retrieval
scores, so the two orders are fused by reciprocal rank, unless ``first_stage_score_key`` names the
metadata key where the retriever left its scores (then the scores are mixed after per-query
z-scoring). The shared rule, and the measurements behind the option, are in
:mod:`poolrag.frameworks.ranking`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import Field, model_validator

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.frameworks.fields import (
    HUGGINGFACE_CACHE_FOLDER,
    HUGGINGFACE_ENGINE_OPTIONS,
    with_huggingface_options,
)
from poolrag.frameworks.ranking import RerankerFields
from poolrag.retrieval.fusion import Ranked, SecondStage

if TYPE_CHECKING:
    from dataclasses import InitVar

#: what ``HuggingFaceCrossEncoder``'s ``model_kwargs`` (its ``CrossEncoder``'s arguments) may hold here
_CROSS_ENCODER_OPTIONS = (*HUGGINGFACE_ENGINE_OPTIONS, HUGGINGFACE_CACHE_FOLDER, "max_length")


class PoolragReranker(RerankerFields, BaseDocumentCompressor):
    """Keep the ``top_n`` documents most relevant to the query, best first.

    Each returned document is a copy whose ``metadata[score_key]`` holds the model's score (when
    fused: the fused score, and ``metadata[rerank_score_key]`` the model's own); the input
    documents are not modified.

    Example:
        .. code-block:: python

            reranker = PoolragReranker(model_name="cross-encoder/ms-marco-MiniLM-L-12-v2", top_n=3)
            retriever = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=...)

    It stands for ``CrossEncoderReranker(model=HuggingFaceCrossEncoder(model_name=..., model_kwargs=...))``:
    ``model_kwargs`` takes that ``CrossEncoder``'s ``device``, ``trust_remote_code``, ``revision``,
    ``token``, ``cache_folder`` and ``max_length`` (the tokens each pair keeps, as
    ``truncate_prompt_tokens``); any other key is refused naming it.
    """

    top_n: int | None = Field(default=3, ge=0, description="Documents to keep; None keeps all, reordered.")
    score_key: str = Field(default="relevance_score", description="Metadata key that receives the score.")
    rerank_score_key: str = Field(
        default="rerank_score", description="Metadata key that receives the model's own score when fused."
    )
    first_stage_score_key: str | None = Field(
        default=None,
        description="With second_stage 'fuse' or 'rrf': the metadata key holding the retriever's score "
        "of each document, to fuse scores instead of orders; every document must carry it.",
    )

    if TYPE_CHECKING:  # HuggingFaceCrossEncoder's options, so that a checker takes its code too: not a
        # field, _cross_encoder_arguments turns them into engine options (hence constructor-only)
        model_kwargs: InitVar[dict[str, Any] | None] = None

    _fusion_fields: ClassVar[tuple[str, ...]] = (*RerankerFields._fusion_fields, "first_stage_score_key")

    @model_validator(mode="before")
    @classmethod
    def _cross_encoder_arguments(cls, data: Any) -> Any:
        """``HuggingFaceCrossEncoder``'s ``model_kwargs`` as engine options and the pairs' cut, so its
        constructor's arguments carry over when the two LangChain objects become this one."""
        if not isinstance(data, dict) or "model_kwargs" not in data:
            return data
        data = dict(data)
        options = dict(data.pop("model_kwargs") or {})
        unknown = sorted(set(options) - set(_CROSS_ENCODER_OPTIONS))
        if unknown:
            raise InvalidInputError(
                f"model_kwargs {unknown} have no counterpart here; taken: "
                f"{', '.join(_CROSS_ENCODER_OPTIONS)} (other engine options go in engine_kwargs)"
            )
        if "max_length" in options:
            max_length = options.pop("max_length")
            if data.get("truncate_prompt_tokens", max_length) != max_length:
                raise InvalidInputError(
                    "model_kwargs' max_length and truncate_prompt_tokens disagree; give one"
                )
            data["truncate_prompt_tokens"] = max_length
        return with_huggingface_options(data, options, None)

    def _first_stage_scores(self, documents: Sequence[Document]) -> list[float] | None:
        key = self.first_stage_score_key
        if key is None:
            return None
        scores = []
        for i, doc in enumerate(documents):
            value = doc.metadata.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInputError(
                    f"documents[{i}].metadata[{key!r}] is {value!r}; first_stage_score_key needs a number "
                    "in every document"
                )
            scores.append(float(value))
        return scores

    def _copies(self, documents: Sequence[Document], ranked: list[Ranked]) -> list[Document]:
        fused = self.second_stage is not SecondStage.REPLACE
        return [
            Document(
                page_content=documents[r.index].page_content,
                metadata={
                    **documents[r.index].metadata,
                    self.score_key: r.score,
                    **({self.rerank_score_key: r.rerank_score} if fused else {}),
                },
                id=documents[r.index].id,
            )
            for r in ranked
        ]

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Score every document against ``query`` and keep the best ``top_n``."""
        documents = _checked(documents)
        texts = [doc.page_content for doc in documents]
        ranked = self._rank(query, texts, self._first_stage_scores(documents))
        return self._copies(documents, ranked)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        documents = _checked(documents)
        texts = [doc.page_content for doc in documents]
        ranked = await self._arank(query, texts, self._first_stage_scores(documents))
        return self._copies(documents, ranked)


def _checked(documents: Sequence[Document]) -> list[Document]:
    """``documents`` as a list of LangChain documents: a generator is read once (the copies index
    it after scoring, where it failed as not subscriptable, and ``CrossEncoderReranker`` returned
    nothing), and texts given as documents are named, where reading them failed on a missing
    ``page_content``."""
    if isinstance(documents, (str, Document)):
        raise InputTypeError(f"documents must be a list of Documents, not one {type(documents).__name__}")
    checked = list(documents)
    for i, doc in enumerate(checked):
        if not isinstance(doc, Document):
            raise InputTypeError(
                f"documents[{i}] is a {type(doc).__name__}, not a Document; "
                "wrap it: Document(page_content=...)"
            )
    return checked
