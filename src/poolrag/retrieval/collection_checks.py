"""Checks every retriever makes before searching: the collection exists, holds the query model's
vectors. A mismatch is refused, since scores across models mean nothing."""

from __future__ import annotations

from poolrag.config.packaged_models import typed_identity
from poolrag.model_facts import ModelFacts, same_weights
from poolrag.sparse.bm25 import BM25_RECORD_KEY, query_encoder_for_record
from poolrag.sparse.words import analyzer_name, recorded_analyzer
from poolrag.stores.base import OUTPUTS_SAID, CollectionSpec, VectorStore, same_outputs
from poolrag.stores.errors import CollectionMismatchError, CollectionNotFoundError


def existing_spec(store: VectorStore, hint: str = "ingest into it first") -> CollectionSpec:
    """The collection's record; a missing collection is refused, ``hint`` saying what to do (each
    door words it for its users)."""
    spec = store.read_spec()
    if spec is None:
        raise CollectionNotFoundError(
            f"collection {store.collection!r} does not exist in {store.name} at {store.location}; {hint}"
        )
    return spec


def check_model(
    spec: CollectionSpec,
    facts: ModelFacts,
    where: str,
    hint: str = "search with the model the collection was ingested with",
) -> None:
    """Refuse a query model whose weights, or pooling of them, differ from those that filled the
    collection: its query vectors would be compared with vectors of another kind."""
    if not same_weights(spec.model_identity, facts.model_identity):
        raise CollectionMismatchError(
            f"collection {spec.name!r} in {where} was filled with {typed_identity(spec.model_identity)}, but "
            f"the query model is {typed_identity(facts.model_identity)}; {hint}"
        )
    if not same_outputs(spec.model_outputs, facts.output_fingerprint):
        raise CollectionMismatchError(
            f"collection {spec.name!r} in {where} was filled with the same model's outputs "
            f"{spec.model_outputs}, but the query model's are {facts.output_fingerprint}{OUTPUTS_SAID}; "
            f"{hint}, pooled as it was (if these are the options it was filled with, an older poolrag "
            "pooled this model otherwise: ingest again into a new collection)"
        )


def bm25_query_encoder(spec: CollectionSpec, given: object) -> object:
    """The sparse query encoder for a ``bm25`` collection: ``given`` when it analyses text as the
    collection recorded (a BM25 encoder with another analyzer is refused: its terms would match
    nothing or the wrong words), or, with none given, the recorded word analyzer, which needs no
    model. Other encoders and collections pass through unchanged."""
    if spec.sparse != "bm25":
        return given
    record = spec.model_options.get(BM25_RECORD_KEY)
    stored = recorded_analyzer(record)
    if given is None:
        return query_encoder_for_record(record, None) if stored is not None else None
    describe = getattr(given, "analyzer_record", None)  # BM25Encoder, and ingest's BM25 chunk encoder
    if callable(describe):
        used = recorded_analyzer({"analyzer": describe()})
        if used != stored:
            raise CollectionMismatchError(
                f"collection {spec.name!r} holds BM25 terms of the {analyzer_name(stored)} analyzer, but "
                f"the sparse encoder uses {analyzer_name(used)}; search with the recorded analyzer"
            )
    return given
