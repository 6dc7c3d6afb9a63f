"""Per-request pooling parameters (the knobs a caller may turn on each call)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from poolrag.errors import InvalidInputError

PoolingTask = Literal["embed", "classify", "score", "token_classify", "token_embed", "reward"]
POOLING_TASKS: tuple[str, ...] = ("embed", "classify", "score", "token_classify", "token_embed", "reward")
InputType = Literal["query", "document"]


@dataclass(frozen=True, slots=True)
class PoolingParams:
    """Options for one call; ``None`` means "use the model's default".

    Attributes:
        dimensions: Matryoshka output size; the vector is truncated *before* normalisation.
        normalize: L2-normalise embeddings (default from the model folder).
        use_activation: apply the classifier's activation (softmax / sigmoid); ``False`` returns logits.
        truncate_prompt_tokens: keep at most this many tokens (``-1``: the model's maximum). Without it,
            an over-long input is an error rather than a silently truncated answer.
        input_type: ``"query"`` or ``"document"``; selects prompts and ColBERT query/document encoding.
        prompt: explicit text prepended to each input, overriding the model's prompts.
        step_tag_id / returned_token_ids: STEP pooling for process reward models.
    """

    dimensions: int | None = None
    normalize: bool | None = None
    use_activation: bool | None = None
    truncate_prompt_tokens: int | None = None
    input_type: InputType | None = None
    prompt: str | None = None
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.input_type not in (None, "query", "document"):
            raise InvalidInputError(f"input_type must be 'query' or 'document', not {self.input_type!r}")
        if self.truncate_prompt_tokens is not None and (
            self.truncate_prompt_tokens == 0 or self.truncate_prompt_tokens < -1
        ):
            raise InvalidInputError("truncate_prompt_tokens must be a positive number of tokens or -1")
        if self.returned_token_ids is not None and not isinstance(self.returned_token_ids, tuple):
            object.__setattr__(self, "returned_token_ids", tuple(self.returned_token_ids))

    def with_updates(self, **changes: object) -> PoolingParams:
        """A copy with some fields changed (params are immutable so they can key caches)."""
        return replace(self, **changes)  # type: ignore[arg-type]
