"""What a search returns: the chunk, where it came from, and the score of every stage it passed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from poolrag.stores.base import StoreHit

#: Payload key holding the caller's id of a text added with ``ColbertRetriever.add_texts`` (the
#: store's own id is derived from it, since stores accept only UUIDs or bounded strings). Prefixed
#: like Milvus's own keys, so a document field such as ``doc_id`` is never mistaken for it.
DOC_ID_KEY = "_poolrag_doc_id"
_ADDED_OWN_KEYS = frozenset({"text", DOC_ID_KEY})
_INGESTED_OWN_KEYS = frozenset({"text", "start", "end", "chunk_index"})


@dataclass
class SearchResult:
    """One retrieved chunk.

    ``payload`` is everything stored with the chunk; :attr:`metadata` is the caller's part of it.
    """

    id: str
    score: float  # the final stage's score (the ranking key)
    text: str
    source: str
    start: int | None
    end: int | None
    stage_scores: dict[str, float] = field(default_factory=dict)  # "recall", "full", "maxsim", "rerank"
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def metadata(self) -> dict[str, Any]:
        """The payload without poolrag's own fields: the metadata given to ``add_texts`` as it was
        given, or, for a chunk ``poolrag ingest`` wrote, its document's metadata plus ``source``."""
        own = _ADDED_OWN_KEYS if DOC_ID_KEY in self.payload else _INGESTED_OWN_KEYS
        return {k: v for k, v in self.payload.items() if k not in own}

    @property
    def position(self) -> dict[str, int]:
        """Where a chunk ``poolrag ingest`` wrote lies in its document: its ``start`` and ``end``
        characters and its ``chunk_index``; empty for a text added whole (``add_texts``)."""
        if DOC_ID_KEY in self.payload:
            return {}
        return {k: v for k in ("start", "end", "chunk_index") if type(v := self.payload.get(k)) is int}

    @classmethod
    def from_hit(cls, hit: StoreHit, stage: str) -> SearchResult:
        payload = dict(hit.payload)
        return cls(
            id=str(payload.get(DOC_ID_KEY, hit.id)),
            score=hit.score,
            text=str(payload.get("text", "")),
            source=str(payload.get("source", "")),
            start=payload.get("start"),
            end=payload.get("end"),
            stage_scores={stage: hit.score},
            payload=payload,
        )
