"""Per-request pooling parameters (the knobs a caller may turn on each call)."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, replace
from typing import Literal

from poolrag.errors import DimensionsError, InvalidInputError, UnsupportedTaskError
from poolrag.model_facts import ModelFacts

POOLING_TASKS: tuple[str, ...] = (
    "embed",
    "classify",
    "score",
    "token_classify",
    "token_embed",
    "reward",
    "sparse_embed",
)
# Not a task callers name: the engine's encode_multi asks a three-head model (BGE-M3) for its
# dense, sparse and ColBERT vectors of each text from one forward pass.
MULTI_VECTOR_TASK = "multi_vector"
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
        max_active_dims: ``sparse_embed`` keeps only this many largest weights per text
            (sentence-transformers' ``max_active_dims``); ``None`` keeps every non-zero weight.
        activation: vLLM's alias of ``use_activation`` (constructor only): folded into
            ``use_activation``, so it is no field of its own and cache keys do not move.
    """

    dimensions: int | None = None
    normalize: bool | None = None
    use_activation: bool | None = None
    truncate_prompt_tokens: int | None = None
    input_type: InputType | None = None
    prompt: str | None = None
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None
    max_active_dims: int | None = None
    activation: InitVar[bool | None] = None

    def __post_init__(self, activation: bool | None) -> None:
        if activation is not None:
            if self.use_activation is not None and self.use_activation != activation:
                raise InvalidInputError(
                    "activation and use_activation disagree; activation is vLLM's alias of "
                    "use_activation, give one of them"
                )
            object.__setattr__(self, "use_activation", activation)
        if self.input_type not in (None, "query", "document"):
            raise InvalidInputError(f"input_type must be 'query' or 'document', not {self.input_type!r}")
        if self.truncate_prompt_tokens is not None and (
            self.truncate_prompt_tokens == 0 or self.truncate_prompt_tokens < -1
        ):
            raise InvalidInputError("truncate_prompt_tokens must be a positive number of tokens or -1")
        if self.max_active_dims is not None and (
            isinstance(self.max_active_dims, bool)
            or not isinstance(self.max_active_dims, int)
            or self.max_active_dims < 1
        ):
            raise InvalidInputError("max_active_dims must be a positive integer")
        if self.returned_token_ids is not None and not isinstance(self.returned_token_ids, tuple):
            object.__setattr__(self, "returned_token_ids", tuple(self.returned_token_ids))

    def with_updates(self, **changes: object) -> PoolingParams:
        """A copy with some fields changed (params are immutable so they can key caches)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def verify(self, task: str, facts: ModelFacts) -> None:
        """Raise unless these parameters make sense for ``task`` on the model ``facts`` describe.

        The one place that decides whether a task and a ``dimensions`` are allowed: the engine,
        the cache, the CLI and the server all call it, so they cannot disagree.
        """
        if task not in POOLING_TASKS:
            raise InvalidInputError(f"unknown pooling task {task!r}; known: {', '.join(POOLING_TASKS)}")
        if task not in facts.supported_tasks:
            raise UnsupportedTaskError(task, facts.supported_tasks)
        if self.dimensions is not None:
            if task != "embed":
                raise DimensionsError(f"dimensions applies to embeddings, not to task {task!r}")
            verify_dimensions(self.dimensions, facts)
        if self.max_active_dims is not None and task != "sparse_embed":
            raise InvalidInputError(f"max_active_dims applies to sparse_embed, not to task {task!r}")


def verify_dimensions(dimensions: object, facts: ModelFacts) -> None:
    """Raise :class:`DimensionsError` unless ``dimensions`` is a size the model's vectors can take.

    The full size is always accepted (it truncates nothing, and OpenAI clients send it); a smaller
    size only on a Matryoshka model, and only a trained size where the model lists them.
    """
    if isinstance(dimensions, bool) or not isinstance(dimensions, int):
        raise DimensionsError("dimensions must be an integer")
    full = facts.embedding_dim or 0
    if dimensions <= 0 or dimensions > full:
        raise DimensionsError(f"dimensions must be between 1 and {full}, got {dimensions}")
    if dimensions == full:
        return
    if not facts.is_matryoshka:
        raise DimensionsError(
            "this model is not a Matryoshka model, so its vectors cannot be truncated to "
            f"{dimensions} dimensions meaningfully; omit dimensions (full size is {full}), or declare "
            'the model Matryoshka (hf_overrides={"is_matryoshka": True}) only if it was trained for it'
        )
    allowed = facts.matryoshka_dimensions
    if allowed is not None and dimensions not in allowed:
        raise DimensionsError(f"dimensions must be one of {list(allowed)}, got {dimensions}")
