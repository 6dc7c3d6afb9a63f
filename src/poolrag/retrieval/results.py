"""What a search returns: the chunk, where it came from, and the score of every stage it passed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from poolrag.stores.base import StoreHit


@dataclass
class SearchResult:
    id: str
    score: float  # the final stage's score (the ranking key)
    text: str
    source: str
    start: int | None
    end: int | None
    stage_scores: dict[str, float] = field(default_factory=dict)  # "recall", "full", "rerank"
    payload: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_hit(cls, hit: StoreHit, stage: str) -> SearchResult:
        payload = dict(hit.payload)
        return cls(
            id=hit.id,
            score=hit.score,
            text=str(payload.get("text", "")),
            source=str(payload.get("source", "")),
            start=payload.get("start"),
            end=payload.get("end"),
            stage_scores={stage: hit.score},
            payload=payload,
        )
