"""Turn chunk texts into what a collection stores: one vector per chunk, or token vectors (ColBERT)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Protocol

import numpy as np

from poolrag.backend import InProcessEngine, PoolingBackend
from poolrag.cache.embedder import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.ingest.chunker import Chunk
from poolrag.ingest.driver import VectorSource
from poolrag.model_facts import ScoreKind
from poolrag.params import PoolingParams
from poolrag.prompt_inputs import TokensPrompt


class ChunkEncoder(VectorSource, Protocol):
    """What a collection records about the model (:class:`VectorSource`), and its vectors."""

    @property
    def computed(self) -> int:
        """Texts that went through the model (cache misses)."""
        ...

    def encode(
        self, texts: Sequence[str], token_ids: Sequence[Sequence[int] | None] | None = None
    ) -> list[np.ndarray]:
        """Vectors of ``texts``. ``token_ids``: each text's bare token ids where known (the
        chunker's), used instead of tokenising again where that gives the same model input."""
        ...


class DenseEncoder:
    """Single vectors through the embedding cache, cut to the collection's Matryoshka size.

    Over an in-process engine (:class:`~poolrag.backend.InProcessEngine`), chunks whose token ids
    are known are sent as token prompts framed with the model's special tokens (the same model
    input as the text, so the same vector), skipping a second tokenisation of every chunk.
    """

    layout = "dense"

    def __init__(self, embedder: CachedEmbedder, dimensions: int | None = None) -> None:
        facts = embedder.facts
        resolved = PoolingParams(dimensions=dimensions).verify("embed", facts)
        self.embedder = embedder
        self.full_dimension = embedder.full_dimension
        self.dimension = resolved.dimensions or self.full_dimension
        self.dimensions = dimensions
        self._document_params = PoolingParams(input_type="document", dimensions=dimensions)
        self.model_identity = facts.model_identity
        self.model_name = facts.model_name
        self.model_outputs = facts.output_fingerprint
        backend = embedder.backend
        self._engine = backend if isinstance(backend, InProcessEngine) else None

    @property
    def computed(self) -> int:
        return self.embedder.misses

    @property
    def late_chunking_refusal(self) -> str | None:
        """Why this model cannot late-chunk, known before any input from an in-process engine or a
        server's model card (:attr:`PoolragClient.late_chunking_refusal
        <poolrag.client.PoolragClient.late_chunking_refusal>`), as the cache's ``embed_chunks`` finds
        the backend's by name; ``None`` where it can, or where a backend cannot say (a server older
        than the card's field: its refusal arrives with the first batch)."""
        refusal = getattr(self.embedder.backend, "late_chunking_refusal", None)
        return refusal if isinstance(refusal, str) else None

    def token_prompts(self, token_ids: Sequence[Sequence[int] | None]) -> list[TokensPrompt | None] | None:
        """Token prompts for the chunks whose ids are known, ``None`` where the text must go."""
        engine = self._engine
        if engine is None or all(ids is None for ids in token_ids):
            return None
        prompts: list[TokensPrompt | None] = []
        for ids in token_ids:
            framed = engine.frame_token_ids(ids, "document") if ids is not None else None
            if ids is not None and framed is None:
                return None  # this model's document inputs cannot be built from bare ids
            prompts.append({"prompt_token_ids": framed} if framed is not None else None)
        return prompts

    def encode(
        self, texts: Sequence[str], token_ids: Sequence[Sequence[int] | None] | None = None
    ) -> list[np.ndarray]:
        inputs = self.token_prompts(token_ids) if token_ids is not None else None
        return list(self.embedder.embed_array(list(texts), self._document_params, model_inputs=inputs))

    def encode_late(self, chunks: Sequence[Chunk]) -> list[np.ndarray]:
        """Late chunking: each document's chunks pooled from one pass over the document's text
        (``chunk.document``), cached under keys of the whole document (see ``embed_chunks``)."""
        vectors: list[np.ndarray] = []
        for _, group in groupby(chunks, key=lambda c: id(c.document)):
            part = list(group)
            document = part[0].document
            if document is None:
                raise InvalidInputError(f"{part[0].source}: late chunking needs the chunks' document text")
            spans = [(c.start, c.end) for c in part]
            vectors.extend(self.embedder.embed_chunks(document, spans, self._document_params))
        return vectors


class ColbertEncoder:
    """ColBERT document token vectors (``[T, D]`` per chunk); not cached, they are large."""

    layout = "multivector"

    def __init__(self, backend: PoolingBackend) -> None:
        facts = backend.facts
        if facts.score_kind is not ScoreKind.MAXSIM:
            raise InvalidInputError(f"{facts.model_name} is not a ColBERT (late-interaction) model")
        self.backend = backend
        self.dimension = self.full_dimension = int(facts.embedding_dim or 0)
        self.model_identity = facts.model_identity
        self.model_name = facts.model_name
        self.model_outputs = facts.output_fingerprint
        self.computed = 0

    def encode(
        self, texts: Sequence[str], token_ids: Sequence[Sequence[int] | None] | None = None
    ) -> list[np.ndarray]:
        """Token vectors; ``token_ids`` are not used (ColBERT inserts a marker token)."""
        arrays = self.backend.encode_arrays(list(texts), "token_embed", PoolingParams(input_type="document"))
        self.computed += len(arrays)
        return [np.asarray(a, dtype=np.float32) for a in arrays]
