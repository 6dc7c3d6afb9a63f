"""The fused second stage's default share, by the reranker's languages and the collection's.

The first stage's language rule (:mod:`poolrag.stores.language_prior`) lets BM25 lead where the
dense model's card does not declare the collection's language. The cross-encoder has the same
weakness: an English MS MARCO reranker fused at :data:`~poolrag.retrieval.fusion.DEFAULT_RERANK_WEIGHT`
over a Spanish collection's first stage lowers MRR@10, while a smaller share gains on every
non-English real set (benchmarks/RESULTS.md, "The second stage's share by the reranker's language").
So the default share is a fact about the pair: the reranker card's ISO 639 codes
(:func:`poolrag.config.model_card.declared_languages`) against the language the collection's BM25
record holds. When either is unknown the share stays the default; a share the caller names or a
saved ``poolrag eval --tune --rerank --save`` chose is not this module's business and wins.
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.backend import PoolingBackend
from poolrag.config.model_card import declared_languages
from poolrag.retrieval.fusion import DEFAULT_RERANK_WEIGHT
from poolrag.stores.base import CollectionSpec
from poolrag.stores.language_prior import recorded_languages

#: The reranker's share when its card does not declare the collection's language. Chosen as the
#: best worst gain over the first stage on six non-English real sets and checked leaving one set
#: out (RESULTS.md).
OUT_OF_LANGUAGE_RERANK_WEIGHT = 0.2


def reranker_languages(backend: PoolingBackend) -> tuple[str, ...]:
    """The ISO 639 codes the reranker's model card declares; ``()`` (unknown) for a backend with no
    local model folder, such as the HTTP client."""
    spec = getattr(backend, "spec", None)  # an Engine's; checked by type, not trusted by name
    if spec is None:
        return ()
    from poolrag.config.model_spec import ModelSpec  # with transformers: loaded with an Engine already

    return declared_languages(spec.path) if isinstance(spec, ModelSpec) else ()


def default_rerank_weight(spec: CollectionSpec, languages: Sequence[str]) -> float:
    """The reranker's share over ``spec``'s collection when nobody named one:
    :data:`OUT_OF_LANGUAGE_RERANK_WEIGHT` when the reranker's card ``languages`` and the collection's
    recorded language are both known and the first does not cover the second, else
    :data:`~poolrag.retrieval.fusion.DEFAULT_RERANK_WEIGHT`. A malformed languages record is refused
    with the collection named."""
    record = recorded_languages(spec)
    language = None if record is None else record.collection
    if languages and language is not None and language not in languages:
        return OUT_OF_LANGUAGE_RERANK_WEIGHT
    return DEFAULT_RERANK_WEIGHT
