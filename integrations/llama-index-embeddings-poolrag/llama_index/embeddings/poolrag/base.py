"""LlamaIndex ``BaseEmbedding`` on poolrag: a one-line swap for ``HuggingFaceEmbedding``.

LlamaIndex cuts text lists into ``embed_batch_size`` pieces and hands each piece to
``_get_text_embeddings``; every piece goes to the engine in one call, which packs it into forward
passes by token budget. The default piece is large (256) so that packing has room to work.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.embeddings.poolrag.slices import slice_named, slices_counted
from pydantic import Field, model_validator

from poolrag.errors import InputTypeError
from poolrag.frameworks.adapter_calls import (
    aembed_text,
    aembed_texts,
    check_text_list,
    embed_text,
    embed_texts,
)
from poolrag.frameworks.fields import (
    HUGGINGFACE_CACHE_FOLDER,
    HUGGINGFACE_ENGINE_OPTIONS,
    EmbeddingFields,
    with_huggingface_options,
)
from poolrag.params import InputType, PoolingParams

if TYPE_CHECKING:
    from dataclasses import InitVar

DEFAULT_BATCH = 256
_R = TypeVar("_R")
#: ``HuggingFaceEmbedding`` arguments that steer sentence-transformers' batching: nothing to do here
_NO_EFFECT = ("parallel_process", "target_devices")

#: BGE v1 / v1.5 hub ids, whose model cards ask retrieval queries to start with an instruction (with
#: empty prompts in the folder): ``HuggingFaceEmbedding`` adds it by hub id, and so does this class,
#: so that the one-line swap keeps the query vectors.
_BGE = re.compile(r"BAAI/bge-(?:small|base|large)-(en|zh)(?:-v1\.5)?")
_BGE_QUERY_INSTRUCTION = {
    "en": "Represent this question for searching relevant passages: ",
    "zh": "为这个句子生成表示以用于检索相关文章：",
}


def unspanned(method: Callable[..., _R]) -> Callable[..., _R]:
    """``method`` without LlamaIndex's ``dispatcher.span`` wrapper. Its DispatcherSpanMixin spans an
    override of a spanned method, so an override calling the spanned base would show each call as
    two nested spans of one name (two embedding steps in a tracer, one of them empty)."""
    return getattr(method, "__wrapped__", method)


def default_query_instruction(model_name: str | None) -> str | None:
    """The instruction ``HuggingFaceEmbedding`` puts before queries for this hub id, or ``None``."""
    match = _BGE.fullmatch(model_name or "")
    return _BGE_QUERY_INSTRUCTION[match.group(1)] if match else None


class PoolragEmbedding(EmbeddingFields, BaseEmbedding):
    """Embeddings from a poolrag engine in process or from ``poolrag serve``.

    Example:
        .. code-block:: python

            Settings.embed_model = PoolragEmbedding(model_name="BAAI/bge-small-en-v1.5")
            Settings.embed_model = PoolragEmbedding(base_url="http://127.0.0.1:8000")  # same vectors

    Args (besides the shared ``engine`` / ``model_name`` / ``base_url`` / ``client`` fields):
        dimensions: Matryoshka output size (the model must be a Matryoshka model).
        cache: a poolrag ``EmbeddingCache`` (or its path), or a ``CachedEmbedder`` on the same
            engine, read through before embedding.
        embed_batch_size: texts per engine call (at most 2048, LlamaIndex's bound).
        query_instruction / text_instruction: ``HuggingFaceEmbedding``'s fields: text put before
            each query / text instead of the model's own prompts (``""``: nothing). Unset or ``""``,
            a query gets the instruction ``HuggingFaceEmbedding`` adds for a BGE hub id; unset, and
            otherwise the model folder's query or document prompt.
        normalize / max_length: ``HuggingFaceEmbedding``'s too: unit vectors by default, as it
            returns them; inputs cut at ``max_length`` tokens. Its ``device``,
            ``trust_remote_code``, ``revision``, ``cache_folder`` (the engine's ``download_dir``)
            and ``truncate_dim`` are taken as well, and ``parallel_process`` / ``target_devices``
            change nothing.
        show_progress_bar: ``HuggingFaceEmbedding``'s too: every ``get_text_embedding_batch``
            (and so every index build) draws LlamaIndex's progress bar on stderr, as
            ``show_progress=True`` does for one call.
    """

    embed_batch_size: int = Field(default=DEFAULT_BATCH, gt=0, le=2048, description="Texts per engine call.")
    query_instruction: str | None = Field(default=None, description="Put before each query.")
    text_instruction: str | None = Field(default=None, description="Put before each text.")
    normalize: bool = Field(
        default=True,
        description="Unit vectors, as HuggingFaceEmbedding returns by default; False: the folder's choice.",
    )
    max_length: int | None = Field(
        default=None, ge=1, description="Cut each input at this many tokens (default: the model's length)."
    )
    show_progress_bar: bool = Field(
        default=False, description="A progress bar on stderr for every get_text_embedding_batch call."
    )
    if TYPE_CHECKING:  # HuggingFaceEmbedding's arguments, so that a checker takes its code too: not
        # fields, _huggingface_arguments turns them into engine options (hence constructor-only)
        device: InitVar[str | None] = None
        trust_remote_code: InitVar[bool] = False
        revision: InitVar[str | None] = None
        token: InitVar[bool | str | None] = None
        cache_folder: InitVar[str | None] = None
        truncate_dim: InitVar[int | None] = None
        parallel_process: InitVar[bool] = False
        target_devices: InitVar[list[str] | None] = None
    else:  # a checker reads the fields as keywords; at run time the name may also come first

        def __init__(self, model_name: str | None = None, /, **data: Any) -> None:
            """``HuggingFaceEmbedding``'s first argument is the model's name, and code often gives it
            so (``HuggingFaceEmbedding("BAAI/bge-small-en-v1.5")``): taken here too, so that the
            one-line swap needs no keyword."""
            if model_name is not None:
                if "model_name" in data:
                    raise InputTypeError("model_name given twice, first and as model_name=; give it once")
                data["model_name"] = model_name
            super().__init__(**data)

    @model_validator(mode="before")
    @classmethod
    def _huggingface_arguments(cls, data: Any) -> Any:
        """``HuggingFaceEmbedding``'s other arguments, so code written for it runs unchanged:
        ``device``, ``trust_remote_code``, ``revision`` and ``cache_folder`` become engine options,
        ``max_length`` the engine's length too (not only a cut), ``truncate_dim`` is
        ``dimensions``; the ones that steer how sentence-transformers batches are taken and change
        nothing (the engine batches by token budget on its own threads)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in _NO_EFFECT:
            data.pop(name, None)
        names = (*HUGGINGFACE_ENGINE_OPTIONS, HUGGINGFACE_CACHE_FOLDER)
        options = {name: data.pop(name) for name in names if name in data}
        if data.get("max_length") is not None and data.get("engine") is None and data.get("base_url") is None:
            # as it sets model.max_seq_length: the model reads max_length tokens, past its folder's
            # max_seq_length (MiniLM's 256, of 512 positions) too, not only up to it
            options["max_model_len"] = data["max_length"]
        return with_huggingface_options(data, options, data.pop("truncate_dim", None))

    @classmethod
    def class_name(cls) -> str:
        return "PoolragEmbedding"

    def _params(self, input_type: InputType | None = None) -> PoolingParams:
        params = super()._params(input_type)
        if self.normalize:
            params = params.with_updates(normalize=True)
        if self.max_length is not None:
            # max_length cuts there, whatever truncate_prompt_tokens said (None: refuse)
            params = params.with_updates(truncate_prompt_tokens=self.max_length, truncate=None)
        if input_type == "query":
            # model_name: the hub id however the model was given (name, EngineArgs or loaded engine)
            instruction = self.query_instruction
            if not instruction:  # "" too, as its `query_instruction or <the BGE instruction>` reads
                instruction = default_query_instruction(self.model_name) or instruction
        else:
            instruction = self.text_instruction
        return params if instruction is None else params.with_updates(prompt=instruction)

    def _get_query_embedding(self, query: str) -> Embedding:
        return embed_text(self.backend, query, self._params("query"))

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await aembed_text(self.backend, query, self._params("query"))

    def _get_text_embedding(self, text: str) -> Embedding:
        return embed_text(self.backend, text, self._params("document"))

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await aembed_text(self.backend, text, self._params("document"))

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """LlamaIndex's batching and progress bar (advancing per ``embed_batch_size`` slice), shown
        for ``show_progress`` or ``show_progress_bar``; a text is named by its place in ``texts``, not
        in its slice: checked whole first, and the slices counted for what the engine refuses."""
        texts = check_text_list(texts)
        with slices_counted(self._slices_reach_the_engine_in_order()):
            batch = unspanned(super().get_text_embedding_batch)
            return batch(texts, show_progress or self.show_progress_bar, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """:meth:`get_text_embedding_batch` for asyncio (two ``embed_batch_size`` slices in the engine
        at a time, so a query is not queued behind a whole ingestion)."""
        texts = check_text_list(texts)
        progress = show_progress or self.show_progress_bar
        with slices_counted(self._slices_reach_the_engine_in_order()):
            return await unspanned(super().aget_text_embedding_batch)(texts, progress, **kwargs)

    def _slices_reach_the_engine_in_order(self) -> bool:
        """Whether each slice reaches ``_get_text_embeddings`` whole and in order (see
        :mod:`~llama_index.embeddings.poolrag.slices`): not through LlamaIndex's embeddings cache
        (only its misses) or rate limiter (it awaits before a slice starts; llama-index-core before
        0.14.16 has none)."""
        return self.embeddings_cache is None and getattr(self, "rate_limiter", None) is None

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        with slice_named(len(texts)):
            return embed_texts(self.backend, texts, self._params("document"))

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        with slice_named(len(texts)):  # before any await (see slices)
            async with _bulk_gate():
                return await aembed_texts(self.backend, texts, self._params("document"))


#: ``aget_text_embedding_batch`` starts every ``embed_batch_size`` slice at once, and the engine
#: takes its callers in turn, so a query sent during an ingestion of 79 slices waited out ~79 turns
#: (20.7 s measured). Two slices in the engine keep its forward passes fed (one runs while the next
#: is tokenised); the query then waits about two batches. Queries and single texts are not gated.
BULK_SLICES_IN_FLIGHT = 2
_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _bulk_gate() -> asyncio.Semaphore:
    """The running loop's gate for document slices (a semaphore belongs to one loop)."""
    return _GATES.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(BULK_SLICES_IN_FLIGHT))
