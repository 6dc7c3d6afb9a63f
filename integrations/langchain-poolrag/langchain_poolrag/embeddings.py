"""LangChain ``Embeddings`` on poolrag: a one-line swap for ``HuggingFaceEmbeddings``.

``embed_documents`` hands the whole list to the engine in one call (it batches by token budget, not
by a fixed count; in pieces only while ``show_progress`` draws a bar), documents and queries get the
model's own document and query prompts, and Matryoshka models can return shorter vectors via
``dimensions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from pydantic import Field, model_validator

from poolrag.errors import InvalidInputError
from poolrag.frameworks.adapter_calls import (
    aembed_images,
    aembed_text,
    aembed_texts,
    embed_images,
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

#: ``encode_kwargs`` keys that shape the vectors here, and those that only steer how
#: sentence-transformers batches and returns them (the engine batches by token budget instead).
_ENCODE_OPTIONS = frozenset({"normalize_embeddings", "prompt", "prompt_name"})
_ENCODE_NO_EFFECT = frozenset({"batch_size", "convert_to_numpy", "convert_to_tensor"})
#: an ``encode_kwargs`` key honoured as ``show_progress`` is, for the documents
_ENCODE_PROGRESS = "show_progress_bar"


class PoolragEmbeddings(EmbeddingFields, Embeddings):
    """Embeddings from a poolrag engine in process or from ``poolrag serve``.

    Example:
        .. code-block:: python

            embeddings = PoolragEmbeddings(model_name="sentence-transformers/all-MiniLM-L6-v2")
            embeddings = PoolragEmbeddings(base_url="http://127.0.0.1:8000")  # same vectors, remote

    Args (besides the shared ``engine`` / ``model_name`` / ``base_url`` / ``client`` fields):
        dimensions: Matryoshka output size (the model must be a Matryoshka model).
        cache: a poolrag ``EmbeddingCache`` (or its path), or a ``CachedEmbedder`` on the same
            engine; unchanged texts are then read from disk instead of being embedded again.
        model_kwargs / encode_kwargs / query_encode_kwargs / show_progress: ``HuggingFaceEmbeddings``'
            arguments, so code written for it runs unchanged: ``device``, ``trust_remote_code``,
            ``revision`` and ``truncate_dim`` (as ``dimensions``: the same direction, but a unit
            vector, where sentence-transformers cuts a folder's normalised vector and returns it
            shorter than 1) of ``model_kwargs``;
            ``normalize_embeddings=True`` (unit vectors even where the folder does not normalise;
            ``False`` leaves the folder's choice, as sentence-transformers does), ``prompt`` and
            ``prompt_name`` (one of the folder's prompts by name) of the encode kwargs.
            ``show_progress=True`` (or ``encode_kwargs={"show_progress_bar": True}``) draws a
            progress bar on stderr while documents are embedded, advancing as pieces of the list
            come back; ``batch_size`` is taken and changes nothing (the engine batches by token
            budget); any other key is refused in one line naming it. ``cache_folder`` is where
            hub models are downloaded (the engine's ``download_dir``); ``multi_process`` changes
            nothing (one engine batches every caller's texts).

    Unlike ``HuggingFaceEmbeddings``, newlines are kept (it turns them into spaces), as ``poolrag
    ingest`` and the embedding cache keep them, so a collection ingested there and the chunks a
    framework adds share vectors and cache entries. Unlike it too, documents and queries get the
    model folder's ``document`` and ``query`` prompts where it defines them (E5, nomic,
    Qwen3-Embedding), as ``poolrag ingest`` stores documents; ``encode_kwargs={"prompt": ""}`` and
    ``query_encode_kwargs={"prompt": ""}`` give the vectors ``HuggingFaceEmbeddings`` gives such a
    folder without a ``default_prompt_name``.
    """

    model_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="HuggingFaceEmbeddings' model_kwargs."
    )
    encode_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="HuggingFaceEmbeddings' encode_kwargs."
    )
    query_encode_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="HuggingFaceEmbeddings' query_encode_kwargs (queries only)."
    )
    show_progress: bool = Field(
        default=False, description="A progress bar on stderr while documents are embedded."
    )
    if TYPE_CHECKING:  # HuggingFaceEmbeddings' other arguments, so that a checker takes its code too:
        # not fields, _huggingface_arguments takes them (hence constructor-only)
        cache_folder: InitVar[str | None] = None
        multi_process: InitVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _huggingface_arguments(cls, data: Any) -> Any:
        """``model_kwargs`` become engine options (refused where no model is loaded here, as
        ``engine_kwargs`` are) before the engine is built; encode kwargs are checked."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("encode_kwargs", "query_encode_kwargs"):
            taken = _ENCODE_OPTIONS | _ENCODE_NO_EFFECT | {_ENCODE_PROGRESS}
            unknown = sorted(set(data.get(name) or {}) - taken)
            if unknown:
                raise InvalidInputError(
                    f"{name} {unknown} have no counterpart here; taken: {', '.join(sorted(taken))}"
                )
        model_kwargs = dict(data.get("model_kwargs") or {})
        unknown = sorted(set(model_kwargs) - set(HUGGINGFACE_ENGINE_OPTIONS) - {"truncate_dim"})
        if unknown:
            raise InvalidInputError(
                f"model_kwargs {unknown} have no counterpart here; taken: "
                f"{', '.join((*HUGGINGFACE_ENGINE_OPTIONS, 'truncate_dim'))} (other engine options go in "
                "engine_kwargs)"
            )
        truncate_dim = model_kwargs.pop("truncate_dim", None)
        data.pop("multi_process", None)  # one engine batches for every caller: nothing to spread
        if HUGGINGFACE_CACHE_FOLDER in data:
            model_kwargs[HUGGINGFACE_CACHE_FOLDER] = data.pop(HUGGINGFACE_CACHE_FOLDER)
        return with_huggingface_options(data, model_kwargs, truncate_dim)

    def _params(self, input_type: InputType | None = None) -> PoolingParams:
        params = super()._params(input_type)
        # as HuggingFaceEmbeddings: a query uses query_encode_kwargs instead of encode_kwargs when given
        encode = (
            (self.query_encode_kwargs or self.encode_kwargs) if input_type == "query" else self.encode_kwargs
        )
        if encode.get("normalize_embeddings"):
            params = params.with_updates(normalize=True)
        return params.with_updates(prompt=encode.get("prompt"), prompt_name=encode.get("prompt_name"))

    def _shows_progress(self) -> bool:
        return self.show_progress or bool(self.encode_kwargs.get(_ENCODE_PROGRESS))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed search documents (with the model's document prompt, if it has one)."""
        return embed_texts(self.backend, texts, self._params("document"), progress=self._shows_progress())

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (with the model's query prompt, if it has one)."""
        return embed_text(self.backend, text, self._params("query"))

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        params = self._params("document")
        return await aembed_texts(self.backend, texts, params, progress=self._shows_progress())

    async def aembed_query(self, text: str) -> list[float]:
        return await aembed_text(self.backend, text, self._params("query"))

    def embed_image(self, uris: list[str]) -> list[list[float]]:
        """Embed images (local paths, ``file://`` URIs or data URLs) into the texts' space, as
        ``OpenCLIPEmbeddings.embed_image`` does and vector stores' ``add_images`` call; the model
        must read images (a CLIP folder)."""
        return embed_images(self.backend, uris, self._params())

    async def aembed_image(self, uris: list[str]) -> list[list[float]]:
        return await aembed_images(self.backend, uris, self._params())
