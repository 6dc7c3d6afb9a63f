"""The sparse source of a hybrid collection, chosen one way for ``poolrag ingest --hybrid`` and for
``poolrag eval`` (which ingests like it): a ``--sparse-model``, else the main model's own sparse
head (one forward pass gives both vectors), else BM25 over the words or word pieces the flags name.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from poolrag.cache import EmbeddingCache
    from poolrag.engine import Engine
    from poolrag.engine_args import EngineArgs
    from poolrag.ingest.encoders import ChunkEncoder
    from poolrag.ingest.sparse_encoders import SparseChunkEncoder


def check_hybrid_model(engine: Engine) -> None:
    """Refuse a model of token vectors for hybrid search, before any store is opened."""
    from poolrag.errors import InvalidInputError
    from poolrag.model_facts import ScoreKind

    if engine.facts.score_kind is ScoreKind.MAXSIM:
        raise InvalidInputError(
            "hybrid search goes with single-vector models, not token vectors (ColBERT, ColPali)"
        )


def hybrid_sources(
    engine: Engine,
    dense: ChunkEncoder,
    cache: EmbeddingCache | None,
    args: argparse.Namespace,
    engine_args: EngineArgs,
    dimensions: int | None = None,
) -> tuple[ChunkEncoder, SparseChunkEncoder]:
    """``(dense encoder, sparse encoder)``: ``dense`` as given, or, when the model's own sparse head
    makes the sparse vectors, one encoder pair sharing its forward pass (at ``dimensions``)."""
    from poolrag.cli.model_loading import load_sparse_model
    from poolrag.cli.store_options import analyzer_from_args
    from poolrag.ingest.shared_pass import has_sparse_head, own_head_encoders
    from poolrag.ingest.sparse_encoders import (
        LearnedSparseChunkEncoder,
        bm25_for_model,
        collection_languages,
        tokenizer_identity,
    )

    check_hybrid_model(engine)
    if args.sparse_model:
        sparse_model = load_sparse_model(engine_args.sibling(args.sparse_model))
        return dense, LearnedSparseChunkEncoder(sparse_model, cache)
    if has_sparse_head(engine):
        return own_head_encoders(engine, cache, dimensions)
    analyzer, languages = analyzer_from_args(args), collection_languages(engine.spec.path, args.language)
    identity = tokenizer_identity(engine)
    return dense, bm25_for_model(engine.tokenizer, identity, cache, analyzer, languages)
