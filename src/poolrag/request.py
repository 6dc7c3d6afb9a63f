"""The unit of work that flows down the pipeline: tokenised input + resolved parameters."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ResolvedParams:
    """Pooling parameters with every default filled in; hashable so identical work is done once."""

    task: str
    dimensions: int | None = None
    normalize: bool = True
    use_activation: bool = True
    input_type: str | None = None
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None
    max_active_dims: int | None = None


@dataclass(frozen=True, slots=True)
class PoolingRequest:
    """One sequence for the model. ``attention`` is only set when some tokens must produce outputs
    without being attended to (ColBERT query expansion); ``None`` means attend to every token.
    ``truncated``: tokens of the input were cut to fit (counted, never part of the work's identity)."""

    token_ids: tuple[int, ...]
    params: ResolvedParams
    token_type_ids: tuple[int, ...] | None = None
    attention: tuple[int, ...] | None = None
    truncated: bool = field(default=False, compare=False)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)
