"""The core :class:`~poolrag.retrieval.ColbertRetriever` as both frameworks' ColBERT retrievers hold it.

Adding, MaxSim search, filters, delete and the collection checks are the core's, on any poolrag store
(in memory by default, or one from :func:`poolrag.stores.open_store`, including collections that
``poolrag ingest`` filled); the framework classes only translate their documents or nodes.
"""

from __future__ import annotations

from poolrag.backend import PoolingBackend
from poolrag.errors import InvalidInputError
from poolrag.retrieval import ColbertRetriever
from poolrag.stores import InMemoryStore, VectorStore


def open_colbert(
    backend: PoolingBackend, store: VectorStore | None = None, truncate_prompt_tokens: int | None = -1
) -> ColbertRetriever:
    """A ColBERT retriever over ``store`` (a new in-memory one when ``None``) running ``backend``."""
    if store is None:
        store = InMemoryStore()
    elif not callable(getattr(store, "search_multivector", None)):
        raise InvalidInputError(
            "store must be a poolrag vector store (InMemoryStore() or poolrag.stores.open_store(...)), "
            f"not {type(store).__name__}"
        )
    return ColbertRetriever(store, backend, truncate_prompt_tokens=truncate_prompt_tokens)
