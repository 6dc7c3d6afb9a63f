"""The hybrid default of a BM25 collection whose language the dense model was not trained on.

An English embedding model on Italian, Spanish or German text is the weak leg: BM25 finds more
(benchmarks/RESULTS.md, "A hybrid default that holds on sets it was not chosen on"), and the
per-query rule of :data:`~poolrag.stores.hybrid.DEFAULT_FUSION`, chosen where dense is the strong
leg, stays 0.03-0.07 MRR@10 below BM25 there. Per-query signals do not tell the two cases apart
for any model (an out-of-language model's cosines are compressed, but how much is the model's own
calibration), so the prior is a fact about the collection: the languages the model card declares
(:func:`poolrag.config.model_card.declared_languages`) and the language the collection was
declared in (``--language``), both recorded in the collection's BM25 record at ingest. When both
are known and the model does not cover the collection's language, the default becomes
:data:`OUT_OF_LANGUAGE_FUSION`; when either is unknown, the default stays as it is.

The record is data: two lists of ISO 639 codes compared with each other. It selects one of two
fixed fusions and nothing else; a malformed record is refused with the collection and field named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from poolrag.errors import InvalidInputError
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores.base import CollectionSpec, HybridFusion
from poolrag.stores.hybrid import DEFAULT_FUSION

#: Where the BM25 record keeps the languages.
LANGUAGES_RECORD_KEY = "languages"
#: The default when the model does not cover the collection's language: BM25 carries most of the
#: ranking, dense still moves near-ties. Chosen as the best worst margin over the better leg on six
#: such real sets under two English models, and checked leaving one set out (RESULTS.md).
OUT_OF_LANGUAGE_FUSION: HybridFusion = ("minmax", 0.75)

#: ISO 639-1 codes of the ``--language`` names (the word analyzer's table).
LANGUAGE_CODES: Mapping[str, str] = {
    "danish": "da",
    "dutch": "nl",
    "english": "en",
    "finnish": "fi",
    "french": "fr",
    "german": "de",
    "hungarian": "hu",
    "italian": "it",
    "norwegian": "no",
    "portuguese": "pt",
    "romanian": "ro",
    "russian": "ru",
    "spanish": "es",
    "swedish": "sv",
    "turkish": "tr",
}
_CODE = re.compile(r"[a-z]{2,3}")


@dataclass(frozen=True)
class LanguageRecord:
    """What a collection records about languages.

    Attributes:
        model: ISO 639 codes the dense model's card declares (``()``: unknown).
        collection: the ISO 639 code the collection was declared in (``None``: unknown).
    """

    model: tuple[str, ...]
    collection: str | None

    @classmethod
    def declared(cls, model_languages: Sequence[str], language: str | None) -> LanguageRecord:
        """From the model card's codes and a ``--language`` name (``None``: not declared)."""
        if language is not None and language not in LANGUAGE_CODES:
            raise InvalidInputError(
                f"unknown collection language {language!r}; choose from {', '.join(sorted(LANGUAGE_CODES))}"
            )
        return cls(tuple(model_languages), None if language is None else LANGUAGE_CODES[language])

    @property
    def uncovered(self) -> bool:
        """Both known, and the collection's language is not one the model declares."""
        return bool(self.model) and self.collection is not None and self.collection not in self.model

    def to_metadata(self) -> dict[str, Any]:
        return {"model": list(self.model), "collection": self.collection}

    @classmethod
    def from_metadata(cls, collection: str, data: object) -> LanguageRecord:
        """The record ``data`` describes, or :class:`InvalidInputError` naming the bad field."""
        problem = _problem(data)
        if problem is not None:
            raise InvalidInputError(
                f"collection {collection!r} has a bad BM25 languages record: {problem}; "
                "ingest into a new collection to replace it"
            )
        assert isinstance(data, Mapping)
        return cls(tuple(data["model"]), data["collection"])


def _problem(data: object) -> str | None:
    """What is wrong with a languages record (its field first), or ``None``."""
    if not isinstance(data, Mapping) or set(data) != {"model", "collection"}:
        return f"record must be an object with 'model' and 'collection', got {data!r}"
    model, language = data["model"], data["collection"]
    if not isinstance(model, list) or not all(isinstance(c, str) and _CODE.fullmatch(c) for c in model):
        return f"model must be a list of ISO 639 codes, got {model!r}"
    if language is not None and not (isinstance(language, str) and _CODE.fullmatch(language)):
        return f"collection must be an ISO 639 code or null, got {language!r}"
    return None


def recorded_languages(spec: CollectionSpec) -> LanguageRecord | None:
    """The collection's languages record (checked), or ``None`` when it has none."""
    bm25 = spec.model_options.get(BM25_RECORD_KEY)
    if not isinstance(bm25, Mapping) or bm25.get(LANGUAGES_RECORD_KEY) is None:
        return None
    return LanguageRecord.from_metadata(spec.name, bm25[LANGUAGES_RECORD_KEY])


def collection_default_fusion(spec: CollectionSpec) -> HybridFusion:
    """The fusion a hybrid search of this collection uses when neither the caller nor a saved
    ``--tune`` record names one: :data:`OUT_OF_LANGUAGE_FUSION` when the recorded languages say the
    model does not cover the collection's, else :data:`~poolrag.stores.hybrid.DEFAULT_FUSION`."""
    record = recorded_languages(spec)
    return OUT_OF_LANGUAGE_FUSION if record is not None and record.uncovered else DEFAULT_FUSION
