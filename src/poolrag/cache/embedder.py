"""``CachedEmbedder``: any :class:`~poolrag.backend.PoolingBackend` behind the embedding cache.

Ingestion, retrieval and the framework adapters wrap their backend (an in-process engine or the
HTTP client) in this class when they want vectors to persist, so a text embedded once (by any of
them, in any process sharing the cache file) is not embedded again. It is a PoolingBackend itself,
so code that takes a backend takes a cached one unchanged. It always asks the backend for
full-size vectors and cuts them down to the requested Matryoshka size, so one cache entry serves
every size. Only ``embed`` is cached; scores and token vectors go straight to the backend.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Sequence

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.cache.keys import cache_namespace, image_key, missing_items, text_key
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.counts import check_count
from poolrag.errors import InputTypeError, InvalidInputError, at_position
from poolrag.image_inputs import image_identity, is_image_input
from poolrag.model_facts import ModelFacts
from poolrag.params import InputType, PoolingParams
from poolrag.pooling.matryoshka import truncate
from poolrag.prompt_inputs import PromptInput
from poolrag.request import ResolvedParams
from poolrag.text_validity import check_text
from poolrag.tokenization.images import turned_upright
from poolrag.tokenization.late_chunks import LATE_CHUNKS_CACHE_TASK, check_spans

logger = logging.getLogger(__name__)


def _with_engine_length_rule(params: PoolingParams, backend: PoolingBackend) -> PoolingParams:
    """``params`` saying what an engine built with ``truncate=False`` does to an over-long input
    when they leave it open: refuse it. The key then says so too, and a vector another engine cut
    for the same text is not served where this one would refuse."""
    engine_args = getattr(backend, "engine_args", None)
    leaves_it = params.truncate is None and params.truncate_prompt_tokens is None
    if leaves_it and engine_args is not None and getattr(engine_args, "truncate", True) is False:
        return params.with_updates(truncate=False)
    return params


def _shapes_text_input(params: PoolingParams) -> bool:
    """Whether ``params`` change the model input the text path makes of a text (an instruction
    prompt, a cut to fewer tokens), so ids tokenised from the bare text are not that input."""
    cut = params.truncate_prompt_tokens
    return params.prompt is not None or params.prompt_name is not None or cut not in (None, -1)


def _image_identity(value: object, name: str) -> str:
    """An image's identity, one of its own where its EXIF orientation turns it upright (a file
    that is not there is refused by ``image_identity``, by name)."""
    return image_identity(value, name, turned=turned_upright(value, name))


class ForwardsToBackend:
    """The :class:`~poolrag.backend.PoolingBackend` calls a wrapper of ``backend`` does not change
    (scores, token outputs): straight to it."""

    backend: PoolingBackend

    def score_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        return self.backend.score_array(text_1, text_2, pooling_params)

    async def ascore_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        return await self.backend.ascore_array(text_1, text_2, pooling_params)

    def encode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]:
        return self.backend.encode_arrays(prompts, pooling_task, pooling_params)

    async def aencode_arrays(
        self, prompts: Sequence[str], pooling_task: str = "embed", pooling_params: PoolingParams | None = None
    ) -> list[np.ndarray]:
        return await self.backend.aencode_arrays(prompts, pooling_task, pooling_params)


class CachedEmbedder(ForwardsToBackend):
    """Embed texts with a backend, reusing vectors from an :class:`EmbeddingCache`.

    Args:
        backend: any :class:`~poolrag.backend.PoolingBackend` whose model supports ``embed``.
        cache: where vectors persist (an :class:`EmbeddingCache` or its file's path); ``None``
            computes every time (the counters still work).
        pooling_params: options applied to every call; a call's own parameters override them
            field by field.
        batch_size: texts per backend call on cache misses; each batch is stored as it arrives, so
            a crash keeps what was already paid for.
    """

    def __init__(
        self,
        backend: PoolingBackend,
        cache: EmbeddingCache | str | os.PathLike[str] | None = None,
        *,
        pooling_params: PoolingParams | None = None,
        batch_size: int = 256,
    ) -> None:
        self.backend = backend
        if isinstance(cache, (str, os.PathLike)):
            cache = EmbeddingCache(cache)
        elif cache is not None and not isinstance(cache, EmbeddingCache):
            kind = type(cache).__name__
            raise InputTypeError(f"cache must be an EmbeddingCache or a file path, not {kind}")
        self.cache = cache
        self.batch_size = check_count(batch_size, "batch_size")
        self._base = _with_engine_length_rule(pooling_params or PoolingParams(), backend)
        self._base.verify("embed", backend.facts)
        self._namespaces: dict[tuple[ModelFacts, PoolingParams], bytes] = {}
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.backend!r}, cache={self.cache!r})"

    # -- what the model is -----------------------------------------------------------------------------
    @property
    def facts(self) -> ModelFacts:
        """The backend's facts: the cache changes where vectors come from, not what they are."""
        return self.backend.facts

    @property
    def full_dimension(self) -> int:
        """Size of the vectors the cache holds (the model's full embedding size)."""
        return int(self.facts.embedding_dim or 0)

    @property
    def model_identity(self) -> str:
        return self.facts.model_identity

    @property
    def normalize(self) -> bool:
        """Whether this embedder's vectors are unit length (so truncated ones are renormalised)."""
        return self._base.verify("embed", self.facts).normalize

    # -- the cache ------------------------------------------------------------------------------------
    def _merged(self, params: PoolingParams | None) -> tuple[PoolingParams, ResolvedParams]:
        """This embedder's parameters with the call's set fields on top (what keys the cache), and
        the same checked and filled as the backend would (the size and normalisation to cut to)."""
        merged = self._base
        if params is not None:
            changes = {
                f.name: getattr(params, f.name)
                for f in dataclasses.fields(params)
                if getattr(params, f.name) is not None
            }
            if "prompt" in changes or "prompt_name" in changes:  # one instruction: the call's
                changes = {"prompt": None, "prompt_name": None} | changes
            merged = merged.with_updates(**changes)
        return merged, merged.verify("embed", self.facts)

    def _keys(self, texts: Sequence[str], params: PoolingParams) -> list[bytes]:
        # Keyed on the facts too: a remote backend's facts change when its server swaps the model.
        shape = (self.facts, params.with_updates(dimensions=None))
        if shape not in self._namespaces:
            self._namespaces[shape] = cache_namespace(shape[0], "embed", shape[1])
        namespace = self._namespaces[shape]
        # an image is keyed by its bytes' digest (in a key space of its own), never by its path; a
        # data URL is an image only to a model that reads images (to any other it is a text)
        images = self.facts.reads_images
        return [
            image_key(namespace, _image_identity(t, f"input[{i}]"))
            if images and is_image_input(t)
            else text_key(namespace, t)
            for i, t in enumerate(texts)
        ]

    def _full_size_request(self, params: PoolingParams) -> PoolingParams:
        # Ask for the full size explicitly where the backend's default would truncate.
        full = self.facts.embedding_dim if self.facts.default_dimensions is not None else None
        return params.with_updates(dimensions=full)

    @staticmethod
    def _check_texts(texts: Sequence[str]) -> list[str]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InputTypeError(f"texts must be a list of strings, not {type(texts).__name__}")
        # named where the caller's list has it (input[2]), as the engine names it
        return [
            t if is_image_input(t) and not isinstance(t, str) else check_text(t, "input", i)
            for i, t in enumerate(texts)
        ]

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found = self.cache.get_many(keys) if self.cache is not None else {}
        return {k: v for k, v in found.items() if v.shape[0] == self.full_dimension}

    def _store(self, computed: dict[bytes, np.ndarray]) -> None:
        if self.cache is not None and computed:
            self.cache.put_many(computed)

    def _assemble(
        self,
        keys: list[bytes],
        found: dict[bytes, np.ndarray],
        computed: dict[bytes, np.ndarray],
        resolved: ResolvedParams,
    ) -> np.ndarray:
        self.misses += len(computed)
        self.hits += len(keys) - sum(1 for k in dict.fromkeys(keys) if k in computed)
        dims = resolved.dimensions or self.full_dimension
        if not keys:
            return np.zeros((0, dims), dtype=np.float32)
        merged = {**found, **computed}
        full = np.stack([merged[k] for k in keys]).astype(np.float32, copy=False)
        if dims >= self.full_dimension:
            return full  # the stored vectors are already what was asked for
        return truncate(full, dims, resolved.normalize)

    # -- PoolingBackend: embeddings through the cache -------------------------------------------------
    def embed_array(
        self,
        prompts: Sequence[str],
        pooling_params: PoolingParams | None = None,
        *,
        model_inputs: Sequence[PromptInput | None] | None = None,
    ) -> np.ndarray:
        """``[N, dimensions or full]`` float32 vectors; only texts missing from the cache hit the model.

        Args:
            model_inputs: what to send the backend for each text on a miss (``None``: the text),
                e.g. a token prompt (``{"prompt_token_ids": [...]}``) the caller already has, for
                a backend that takes them (:class:`~poolrag.engine.Engine`); the cache is still
                keyed by the text, so the two must be the same model input. Where the parameters
                set a prompt or a cut (which the text path applies and a token prompt does not),
                they are not used: the texts go.
        """
        items = self._check_texts(prompts)
        if model_inputs is not None and len(model_inputs) != len(items):
            raise ValueError("model_inputs must have one entry per text")
        params, resolved = self._merged(pooling_params)
        if model_inputs is not None and _shapes_text_input(params):
            model_inputs = None
        keys = self._keys(items, params)
        found = self._lookup(keys)
        todo = missing_items(items, keys, found)
        if model_inputs is not None:
            sent = dict(zip(keys, model_inputs, strict=True))
            todo = [(k, t if sent[k] is None else sent[k], where) for k, t, where in todo]
        request = self._full_size_request(params)
        computed: dict[bytes, np.ndarray] = {}
        for start in range(0, len(todo), self.batch_size):
            part = todo[start : start + self.batch_size]
            try:
                vectors = self.backend.embed_array([t for _, t, _ in part], request)
            except InvalidInputError as exc:
                raise at_position(exc, [where for _, _, where in part]) from None
            batch = {k: vectors[i] for i, (k, _, _) in enumerate(part)}
            self._store(batch)
            computed.update(batch)
        return self._assemble(keys, found, computed, resolved)

    async def aembed_array(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """:meth:`embed_array` for asyncio: the backend's async twin, the cache file on a thread."""
        items = self._check_texts(prompts)
        params, resolved = self._merged(pooling_params)
        keys = self._keys(items, params)
        found = await asyncio.to_thread(self._lookup, keys)
        todo = missing_items(items, keys, found)
        request = self._full_size_request(params)
        computed: dict[bytes, np.ndarray] = {}
        for start in range(0, len(todo), self.batch_size):
            part = todo[start : start + self.batch_size]
            try:
                vectors = await self.backend.aembed_array([t for _, t, _ in part], request)
            except InvalidInputError as exc:
                raise at_position(exc, [where for _, _, where in part]) from None
            batch = {k: np.asarray(vectors[i], dtype=np.float32) for i, (k, _, _) in enumerate(part)}
            await asyncio.to_thread(self._store, batch)
            computed.update(batch)
        return self._assemble(keys, found, computed, resolved)

    # -- late chunking: vectors keyed on the whole document ---------------------------------------------
    def embed_chunks(
        self, document: str, spans: Sequence[tuple[int, int]], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """:meth:`~poolrag.Engine.embed_chunks` through the cache (an in-process backend only).

        A late vector depends on the whole document, so its key is the span with the document's
        text under a ``late_chunks`` namespace: it never answers for the chunk's text embedded alone,
        nor for the same span of an edited document.
        """
        embed_chunks = getattr(self.backend, "embed_chunks", None)
        if embed_chunks is None:
            raise InvalidInputError(
                f"late chunking needs the model in this process; {self.backend!r} is not an Engine"
            )
        params, resolved = self._merged(pooling_params)
        namespace = cache_namespace(self.facts, LATE_CHUNKS_CACHE_TASK, params.with_updates(dimensions=None))
        document = check_text(document, "document")
        spans = check_spans(document, spans)  # named spans[i] as the caller has them
        document_key = text_key(namespace, document)
        keys = [text_key(document_key, f"{start}:{end}") for start, end in spans]
        found = self._lookup(keys)
        todo = missing_items(spans, keys, found)
        computed: dict[bytes, np.ndarray] = {}
        if todo:
            try:
                sent = [span for _, span, _ in todo]
                vectors = embed_chunks(document, sent, self._full_size_request(params))
            except InvalidInputError as exc:  # spans[i] of the spans sent: the caller's spans[where]
                raise at_position(exc, [where for _, _, where in todo]) from None
            computed = {k: vectors[i] for i, (k, _, _) in enumerate(todo)}
            self._store(computed)
        return self._assemble(keys, found, computed, resolved)

    # -- conveniences by input type --------------------------------------------------------------------
    def embed(
        self, texts: Sequence[str], *, input_type: InputType | None = None, dimensions: int | None = None
    ) -> np.ndarray:
        """:meth:`embed_array` with the two parameters callers set per call."""
        return self.embed_array(texts, PoolingParams(input_type=input_type, dimensions=dimensions))

    def embed_documents(self, texts: Sequence[str], dimensions: int | None = None) -> np.ndarray:
        return self.embed(texts, input_type="document", dimensions=dimensions)

    def embed_query(self, text: str, dimensions: int | None = None) -> np.ndarray:
        if not isinstance(text, str):
            raise InputTypeError(f"query must be a string, not {type(text).__name__}")
        return self.embed([text], input_type="query", dimensions=dimensions)[0]

    async def aembed(
        self, texts: Sequence[str], *, input_type: InputType | None = None, dimensions: int | None = None
    ) -> np.ndarray:
        return await self.aembed_array(texts, PoolingParams(input_type=input_type, dimensions=dimensions))

    async def aembed_documents(self, texts: Sequence[str], dimensions: int | None = None) -> np.ndarray:
        return await self.aembed(texts, input_type="document", dimensions=dimensions)

    async def aembed_query(self, text: str, dimensions: int | None = None) -> np.ndarray:
        if not isinstance(text, str):
            raise InputTypeError(f"query must be a string, not {type(text).__name__}")
        return (await self.aembed([text], input_type="query", dimensions=dimensions))[0]
