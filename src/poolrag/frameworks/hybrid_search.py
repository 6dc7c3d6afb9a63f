"""The core :class:`~poolrag.retrieval.Retriever`'s hybrid search as both frameworks' hybrid
retrievers hold it.

The collection is one ``poolrag ingest --hybrid`` or ``poolrag eval`` filled (any poolrag store, from
:func:`poolrag.stores.open_store`); a search fuses its dense and sparse legs as the collection's saved
record says (``poolrag eval --tune --save``) unless the caller names a fusion, and by the default
rule when nothing was saved. The framework classes only translate results into documents or nodes.
"""

from __future__ import annotations

from poolrag.backend import PoolingBackend
from poolrag.cache import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.params import PoolingParams
from poolrag.retrieval import Retriever, SparseQueryEncoder
from poolrag.retrieval.collection_checks import existing_spec
from poolrag.sparse.bm25 import BM25_RECORD_KEY, query_encoder_for_record
from poolrag.sparse.words import recorded_analyzer
from poolrag.stores import HybridFusion, VectorStore
from poolrag.stores.hybrid import check_fusion


def open_hybrid(
    backend: PoolingBackend,
    store: VectorStore,
    sparse_encoder: SparseQueryEncoder | None = None,
    truncate_prompt_tokens: int | None = -1,
) -> Retriever:
    """A hybrid retriever over ``store``'s existing collection. ``sparse_encoder`` turns queries into
    sparse vectors; by default, for a ``bm25`` collection, BM25 with the analyzer the collection
    recorded (the model's word pieces or the word analyzer, as ``poolrag search`` does); a ``learned``
    collection needs its sparse model's encoder. ``truncate_prompt_tokens`` is the adapters' setting
    for the query's dense leg (-1: cut at the model's length, as sentence-transformers does)."""
    if not callable(getattr(store, "search_hybrid", None)) or not callable(getattr(store, "read_spec", None)):
        raise InvalidInputError(
            "store must be a poolrag vector store (poolrag.stores.open_store(...)), "
            f"not {type(store).__name__}"
        )
    spec = existing_spec(store)
    if spec.sparse is None:
        raise InvalidInputError(
            f"collection {spec.name!r} has no sparse field; ingest it with 'poolrag ingest --hybrid' "
            "for hybrid search"
        )
    if sparse_encoder is None:
        if spec.sparse != "bm25":
            raise InvalidInputError(
                f"collection {spec.name!r} holds {spec.sparse} sparse vectors: pass sparse_encoder= "
                "(the model that made them, e.g. poolrag.frameworks.sparse_encoding.LearnedSparseEncoder)"
            )
        record = spec.model_options.get(BM25_RECORD_KEY)
        tokenizer = getattr(backend, "tokenizer", None)
        if recorded_analyzer(record) is None and tokenizer is None:
            raise InvalidInputError(
                "a remote model has no tokenizer here: pass sparse_encoder=BM25Encoder(tokenizer)"
            )
        sparse_encoder = query_encoder_for_record(record, tokenizer)
    if not isinstance(backend, CachedEmbedder):  # a cache the adapter built carries the setting
        params = PoolingParams.cut_at(truncate_prompt_tokens)
        backend = CachedEmbedder(backend, pooling_params=params)
    retriever = Retriever(store, backend, sparse_encoder=sparse_encoder)
    retriever.saved  # noqa: B018 - a bad saved record is refused here, not at the first search
    return retriever


def check_optional_fusion(fusion: object) -> HybridFusion | None:
    """``None`` (the collection's saved setting, else the default) or a checked fusion rule; a list
    such as ``["minmax", 0.2]`` (what a config file gives) reads as the tuple."""
    if fusion is None:
        return None
    if isinstance(fusion, list):
        fusion = tuple(fusion)
    return check_fusion(fusion)
