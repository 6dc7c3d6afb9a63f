"""Pooler configuration: the defaults a model folder implies, overridable by the caller."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from poolrag.errors import InvalidInputError

PoolingType = Literal["CLS", "MEAN", "LAST", "ALL", "STEP"]
Activation = Literal["softmax", "sigmoid", "identity"]


@dataclass(frozen=True, slots=True)
class PoolerConfig:
    """How hidden states become outputs. ``None`` fields fall back to the model folder's defaults.

    Mirrors vLLM's ``pooler_config`` keys so configurations carry over.
    """

    pooling_type: PoolingType | None = None
    normalize: bool | None = None
    activation: Activation | None = None
    use_activation: bool | None = None
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None
    dimensions: int | None = None

    @classmethod
    def from_value(cls, value: PoolerConfig | dict[str, Any] | None) -> PoolerConfig:
        if value is None:
            return cls()
        if isinstance(value, PoolerConfig):
            return value
        known = {f.name for f in fields(cls)}
        unknown = set(value) - known
        if unknown:
            raise InvalidInputError(f"unknown pooler_config keys: {sorted(unknown)}; known: {sorted(known)}")
        data = dict(value)
        if data.get("pooling_type") is not None:
            data["pooling_type"] = str(data["pooling_type"]).upper()
            if data["pooling_type"] not in ("CLS", "MEAN", "LAST", "ALL", "STEP"):
                raise InvalidInputError(f"unknown pooling_type {value['pooling_type']!r}")
        if data.get("returned_token_ids") is not None:
            data["returned_token_ids"] = tuple(int(t) for t in data["returned_token_ids"])
        return cls(**data)

    def merged_over(self, defaults: PoolerConfig) -> PoolerConfig:
        """Fields set here win; unset ones come from ``defaults``."""
        return PoolerConfig(
            **{
                f.name: getattr(self, f.name)
                if getattr(self, f.name) is not None
                else getattr(defaults, f.name)
                for f in fields(PoolerConfig)
            }
        )
