"""What the retriever needs from a sparse model: query texts in, sparse vectors out.

A protocol rather than a class, so the lexical :class:`~poolrag.sparse.BM25Encoder` (unit query
weights; the store supplies IDF) and learned sparse models (SPLADE, BGE-M3's sparse head, served
by an engine or a client) plug in alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from poolrag.errors import InvalidInputError
from poolrag.sparse.vector import SparseVector

SearchMode = Literal["dense", "sparse", "hybrid"]
SEARCH_MODES: tuple[str, ...] = ("dense", "sparse", "hybrid")


class NoQueryTermsError(InvalidInputError):
    """A sparse search's query has no term the sparse encoder keeps (stop words, punctuation, an
    emoji or a script the vocabulary reads as ``[UNK]``): one search says so, where an evaluation
    ranks nothing for that query, as BM25 does in BEIR, and goes on."""


@runtime_checkable
class SparseQueryEncoder(Protocol):
    def encode_queries(self, texts: Sequence[str]) -> list[SparseVector]:
        """One sparse vector per query, in the collection's vocabulary (token ids)."""
        ...
