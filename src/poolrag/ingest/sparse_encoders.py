"""Sparse vectors for chunks, written next to the dense ones in collections with a sparse field.

Lexical BM25 needs no second model: the term counts come from the embedding model's own
tokenizer (cached, see :mod:`poolrag.cache.term_counts`). A stored document vector holds BM25's
term-frequency half, normalised by the collection's average chunk length; the IDF half is the
store's business at query time. That average is pinned once per collection (given, or taken from
the first batch written) and recorded in the collection, so every later run, a resumed one
included, writes the same vector for the same chunk: re-runs and resumes stay idempotent, and no
stored vector ever has to be rewritten because the corpus grew.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.cache.term_counts import CachedTermCounter
from poolrag.errors import InvalidInputError
from poolrag.sparse.bm25 import BM25Encoder, BM25Parameters
from poolrag.sparse.vector import SparseVector

#: Where a collection's BM25 settings are recorded (``CollectionSpec.model_options``).
BM25_OPTIONS_KEY = "bm25"


class SparseChunkEncoder(Protocol):
    kind: str  # the collection's sparse field: "bm25" | "learned"

    @property
    def computed(self) -> int:
        """Texts that went through the tokenizer or model (cache misses)."""

    def settings(self) -> dict[str, Any]:
        """What to record in the collection so later runs encode the same way."""

    def adopt(self, recorded: dict[str, Any] | None, first_batch: Sequence[str]) -> None:
        """Take the collection's recorded settings, or (when none are fixed yet) fix them from
        ``first_batch``; a no-op once fixed."""

    def encode(self, texts: Sequence[str]) -> list[SparseVector]: ...


class BM25ChunkEncoder:
    """BM25 document vectors over a model's tokenizer, term counts through the cache.

    Args:
        encoder: the BM25 encoder (tokenizer and ``k1``/``b``).
        tokenizer_identity: the model identity; keys the cached counts.
        cache: the embedding cache, or ``None``.
        avg_doc_length: the collection's mean chunk length in terms; ``None`` takes the collection's
            recorded value, or the mean of the first batch for a new collection.
    """

    kind = "bm25"

    def __init__(
        self,
        encoder: BM25Encoder,
        tokenizer_identity: str,
        cache: EmbeddingCache | None = None,
        *,
        avg_doc_length: float | None = None,
    ) -> None:
        if avg_doc_length is not None and not (math.isfinite(avg_doc_length) and avg_doc_length > 0):
            raise InvalidInputError(f"the average chunk length must be a positive number: {avg_doc_length}")
        self.encoder = encoder
        self.counter = CachedTermCounter(encoder, tokenizer_identity, cache)
        self.avg_doc_length = avg_doc_length

    @property
    def computed(self) -> int:
        return self.counter.misses

    def term_counts(self, texts: Sequence[str]) -> list[dict[int, int]]:
        return self.counter.term_counts(texts)

    def settings(self) -> dict[str, Any]:
        parameters = self.encoder.parameters
        return {"avg_doc_length": self.avg_doc_length, "k1": parameters.k1, "b": parameters.b}

    def adopt(self, recorded: dict[str, Any] | None, first_batch: Sequence[str]) -> None:
        if recorded and recorded.get("avg_doc_length") is not None:
            try:
                parameters = BM25Parameters(float(recorded["k1"]), float(recorded["b"]))
                self.avg_doc_length = float(recorded["avg_doc_length"])
            except (KeyError, TypeError, ValueError) as exc:
                problem = f"the collection's recorded BM25 settings are unreadable: {exc}"
                raise InvalidInputError(problem) from None
            self.encoder.parameters = parameters
            return
        if self.avg_doc_length is None and first_batch:
            lengths = [sum(c.values()) for c in self.term_counts(first_batch)]
            self.avg_doc_length = max(sum(lengths) / len(lengths), 1.0)

    def encode(self, texts: Sequence[str]) -> list[SparseVector]:
        if self.avg_doc_length is None:
            raise InvalidInputError("BM25 chunk vectors need the collection's average length; call adopt()")
        return self.encoder.document_vectors(self.term_counts(texts), self.avg_doc_length)

    def encode_queries(self, texts: Sequence[str]) -> list[SparseVector]:
        """Unit-weight query vectors: the store multiplies each term by its IDF."""
        return self.encoder.encode_queries(texts)


def bm25_for_model(
    tokenizer: Any, model_identity: str, cache: EmbeddingCache | None = None
) -> BM25ChunkEncoder:
    """Lexical BM25 from the embedding model's own tokenizer (the default sparse source)."""
    return BM25ChunkEncoder(BM25Encoder(tokenizer), model_identity, cache)
