"""Per-request pooling parameters (the knobs a caller may turn on each call), and the one rule
that checks them against a model and fills what they leave unset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field, replace
from typing import Literal, TypeVar, get_args

from poolrag.errors import DimensionsError, InvalidInputError, UnsupportedTaskError
from poolrag.model_facts import ModelFacts, PoolingTask, ScoreKind
from poolrag.request import ResolvedParams

POOLING_TASKS: tuple[str, ...] = get_args(PoolingTask)
# Not a task callers name: the engine's encode_multi asks a three-head model (BGE-M3) for its
# dense, sparse and ColBERT vectors of each text from one forward pass.
MULTI_VECTOR_TASK = "multi_vector"
#: Tasks whose output is a dense vector (or one per token): ``normalize`` is their switch
#: (``use_activation`` its newer vLLM name). Sparse weights are never normalised, and the others
#: (classify, cross-encoder score, token_classify, reward) have only ``use_activation``.
VECTOR_TASKS = frozenset({"embed", "token_embed"})
InputType = Literal["query", "document"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PoolerDefaults:
    """What a loaded model fills in where a request is silent, beyond its :class:`ModelFacts`.

    The facts already carry the ``embed`` defaults (``default_dimensions``,
    ``normalizes_embeddings``), so a caller holding only facts (the server before a request takes
    a slot, the cache, the HTTP client) verifies with these generic defaults and reads the embed
    fields; the engine passes its model's own (the resolved pooler config and head shape).

    Attributes:
        use_activation: the pooler config's ``use_activation`` (``None``: apply it, except on raw rewards).
        normalize: the pooler config's normalise switch as the caller set it (``normalize`` or
            ``use_activation``), the default of ``token_embed`` as in vLLM (``None``: normalise).
        raw_rewards: sequence reward heads return the raw value, so ``reward`` skips the activation.
        step_tag_id / returned_token_ids: the pooler config's STEP settings for reward models.
        head_columns: how many columns ``returned_token_ids`` may index (``None``: any id from 0).
        task_aliases: tasks answered by another task's pooler (a reward model's ``token_classify``).
        token_rows: the tasks answered by per-token classifier rows, the only ones ``returned_token_ids``
            picks columns of (and, for ``reward``, ``step_tag_id`` selects rows of: STEP pooling);
            ``None``: not known here (the generic defaults), so neither is refused for it.
    """

    use_activation: bool | None = None
    normalize: bool | None = None
    raw_rewards: bool = False
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None
    head_columns: int | None = None
    task_aliases: Mapping[str, str] = field(default_factory=dict)
    token_rows: frozenset[str] | None = None


_GENERIC = PoolerDefaults()


@dataclass(frozen=True, slots=True)
class LateChunkingParams:
    """vLLM's late chunking (``PoolingParams(late_chunking_params=...)``) of
    ``LLM.encode(text, pooling_task="token_embed")``: the text's token vectors, special tokens
    included, averaged ``chunk_size`` tokens at a time into one vector per chunk (normalised unless
    ``use_activation=False``), with each chunk's token and character ranges. The Engine's own late
    chunking takes character spans instead (:meth:`poolrag.Engine.embed_chunks`)."""

    chunk_size: int

    def __post_init__(self) -> None:
        size = self.chunk_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidInputError(
                f"late chunking chunk_size must be a positive integer, got {size!r}", param="chunk_size"
            )


@dataclass(frozen=True, slots=True)
class PoolingParams:
    """Options for one call; ``None`` means "use the model's default".

    Attributes:
        dimensions: Matryoshka output size; the vector is truncated *before* normalisation (each
            token vector, for a ColBERT model's ``token_embed``).
        normalize: L2-normalise embeddings (default from the model folder); refused for tasks
            whose outputs are scores or labels, which it would not change.
        use_activation: apply the classifier's activation (softmax / sigmoid); ``False`` returns logits.
            On vector tasks it is vLLM's newer name of ``normalize`` (both given must agree).
        truncate_prompt_tokens: keep at most this many tokens (``-1``: the model's maximum).
        truncate: what happens to an input over the model's length when ``truncate_prompt_tokens``
            is unset: ``True`` keeps its first tokens, ``False`` refuses it (:class:`InputTooLongError`),
            ``None`` leaves it to the engine (``Engine(truncate=...)``, by default truncating, as
            sentence-transformers and TEI do). See :meth:`token_limit`.
        input_type: ``"query"`` or ``"document"``; selects prompts and ColBERT query/document encoding.
        prompt: explicit text prepended to each input, overriding the model's prompts.
        prompt_name: one of the model folder's prompts by name (sentence-transformers'
            ``prompt_name``: ``"classification"``, ``"clustering"``...), instead of ``prompt``.
        step_tag_id / returned_token_ids: STEP pooling for process reward models.
        max_active_dims: ``sparse_embed`` keeps only this many largest weights per text
            (sentence-transformers' ``max_active_dims``); ``None`` keeps every non-zero weight.
        activation / softmax: vLLM's older aliases of ``use_activation`` (constructor only): folded
            into ``use_activation``, so they are no fields of their own and cache keys do not move.
        late_chunking_params: vLLM's :class:`LateChunkingParams`, which :class:`poolrag.LLM`'s
            ``encode(pooling_task="token_embed")`` runs; every other call refuses it.
    """

    dimensions: int | None = None
    normalize: bool | None = None
    use_activation: bool | None = None
    truncate_prompt_tokens: int | None = None
    input_type: InputType | None = None
    prompt: str | None = None
    step_tag_id: int | None = None
    returned_token_ids: Sequence[int] | None = None  # kept as a tuple
    max_active_dims: int | None = None
    prompt_name: str | None = None  # last: fields added later keep positional callers' order
    truncate: bool | None = None
    activation: InitVar[bool | None] = None
    late_chunking_params: LateChunkingParams | None = None
    softmax: InitVar[bool | None] = None

    def __post_init__(self, activation: bool | None, softmax: bool | None) -> None:
        for alias, value in (("activation", activation), ("softmax", softmax)):
            if value is None:
                continue
            if self.use_activation is not None and self.use_activation != value:
                raise InvalidInputError(
                    f"{alias} and use_activation disagree; {alias} is vLLM's older name of "
                    "use_activation, give one of them"
                )
            object.__setattr__(self, "use_activation", value)
        if self.input_type not in (None, "query", "document"):
            raise InvalidInputError(f"input_type must be 'query' or 'document', not {self.input_type!r}")
        if self.truncate_prompt_tokens is not None and (
            self.truncate_prompt_tokens == 0 or self.truncate_prompt_tokens < -1
        ):
            raise InvalidInputError(
                "truncate_prompt_tokens must be a positive number of tokens or -1",
                param="truncate_prompt_tokens",
            )
        if self.truncate is not None and not isinstance(self.truncate, bool):
            raise InvalidInputError(
                f"truncate must be True or False, not {self.truncate!r}", param="truncate"
            )
        if self.truncate is False and self.truncate_prompt_tokens is not None:
            raise InvalidInputError(
                "truncate=False refuses over-long inputs and truncate_prompt_tokens truncates them; give one",
                param="truncate",
            )
        if self.prompt_name is not None:
            if not isinstance(self.prompt_name, str) or not self.prompt_name:
                raise InvalidInputError("prompt_name must be the name of one of the model's prompts")
            if self.prompt is not None:
                raise InvalidInputError("give prompt or prompt_name, not both", param="prompt_name")
        if self.max_active_dims is not None and (
            isinstance(self.max_active_dims, bool)
            or not isinstance(self.max_active_dims, int)
            or self.max_active_dims < 1
        ):
            raise InvalidInputError("max_active_dims must be a positive integer")
        if self.returned_token_ids is not None and not isinstance(self.returned_token_ids, tuple):
            object.__setattr__(self, "returned_token_ids", tuple(self.returned_token_ids))

    @classmethod
    def cut_at(cls, truncate_prompt_tokens: int | None, **fields: object) -> PoolingParams:
        """Parameters from a setting where ``None`` means "never cut" (the framework adapters' and
        retrievers' ``truncate_prompt_tokens``), so it refuses over-long inputs whatever the
        engine's default; a number of tokens (``-1``: the model's maximum) cuts there."""
        refuse = False if truncate_prompt_tokens is None else None
        return cls(truncate_prompt_tokens=truncate_prompt_tokens, truncate=refuse, **fields)  # type: ignore[arg-type]

    def clone(self) -> PoolingParams:
        """An equal, separate copy (vLLM's method; these params are immutable, so it is also safe to
        share the original)."""
        return replace(self)

    def with_updates(self, **changes: object) -> PoolingParams:
        """A copy with some fields changed (params are immutable so they can key caches)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def token_limit(self, engine_truncates: bool) -> int | None:
        """How many tokens of an over-long input this request keeps: ``truncate_prompt_tokens``
        where given (``-1``: the model's maximum), else the request's ``truncate`` or, unset, the
        engine's default; ``None`` keeps every token, so an input over the model's length is an
        :class:`InputTooLongError` (or, on a model whose pooler config embeds long inputs in chunks,
        chunked). The one long-input rule: every door (the engine's calls, the server's routes
        through it) decides here."""
        if self.truncate_prompt_tokens is not None:
            return self.truncate_prompt_tokens
        truncates = engine_truncates if self.truncate is None else self.truncate
        return -1 if truncates else None

    def verify(self, task: str, facts: ModelFacts, defaults: PoolerDefaults = _GENERIC) -> ResolvedParams:
        """These parameters checked for ``task`` on the model ``facts`` describe, every unset one filled.

        The one place that decides whether a task and a ``dimensions`` are allowed and what a
        request left unset becomes (as vLLM's ``PoolingParams.verify``): the engine calls it once
        per request, and the server, cache, client and ingestion call it to refuse early, so none
        of them can disagree. ``dimensions`` is filled before it is checked, so a model's own
        default size is held to the same rule as a requested one.
        """
        embed = task == "embed"
        dimensions = self.dimensions if self.dimensions is not None or not embed else facts.default_dimensions
        if task not in POOLING_TASKS:
            raise InvalidInputError(f"unknown pooling task {task!r}; known: {', '.join(POOLING_TASKS)}")
        if task not in facts.supported_tasks:
            raise UnsupportedTaskError(task, facts.supported_tasks)
        if dimensions is not None:
            _check_dimensions(dimensions, task, facts)
        self._check_task_fields(task, facts, defaults)
        normalize = self._normalize_switch(task, facts)
        asked, task = task, defaults.task_aliases.get(task, task)
        self._check_step_pooling(asked, task, defaults.token_rows)
        self._check_score_role(asked, facts)
        return ResolvedParams(
            task=task,
            dimensions=dimensions,
            normalize=bool(
                _first(normalize, facts.normalizes_embeddings if embed else _first(defaults.normalize, True))
            ),
            use_activation=bool(
                _first(
                    self.use_activation,
                    defaults.use_activation,
                    not (task == "reward" and defaults.raw_rewards),
                )
            ),
            input_type=self.input_type,
            step_tag_id=_first(self.step_tag_id, defaults.step_tag_id) if task == "reward" else None,
            returned_token_ids=_returned_token_ids(self, task, defaults),
            max_active_dims=self.max_active_dims,
        )

    def _check_task_fields(self, task: str, facts: ModelFacts, defaults: PoolerDefaults) -> None:
        """Fields that apply to some tasks or models only, refused where they would change nothing:
        dropped, the answer would look as if they had been applied."""
        if self.late_chunking_params is not None:
            raise InvalidInputError(
                "late_chunking_params is vLLM's late chunking of LLM.encode(pooling_task='token_embed'); "
                "the Engine late-chunks by character spans (embed_chunks)",
                param="late_chunking_params",
            )
        if self.max_active_dims is not None and task != "sparse_embed":
            raise InvalidInputError(f"max_active_dims applies to sparse_embed, not to task {task!r}")
        if self.prompt_name is not None and self.prompt_name not in facts.prompt_names:
            known = ", ".join(repr(n) for n in facts.prompt_names)
            raise InvalidInputError(
                f"prompt_name {self.prompt_name!r} is not one of this model's prompts"
                + (f" ({known})" if known else " (its folder names none)"),
                param="prompt_name",
            )
        steps = self.step_tag_id is not None or self.returned_token_ids is not None
        if steps and task not in ("reward", "token_classify"):
            raise InvalidInputError(
                f"step_tag_id and returned_token_ids apply to rewards, not to task {task!r}"
            )
        if task == "reward" and defaults.raw_rewards and self.use_activation:
            raise InvalidInputError(  # refused, not ignored: the answer would look activated
                "use_activation: this reward model's reward is its head's raw value, with no activation "
                "to switch on (classify gives the activated score)",
                param="use_activation",
            )

    def _check_step_pooling(self, asked: str, task: str, token_rows: frozenset[str] | None) -> None:
        """``step_tag_id`` / ``returned_token_ids`` refused where the model's pooler for ``task``
        would not read them (as vLLM refuses them without STEP pooling): dropped, the answer would
        look as if they had been applied."""
        if token_rows is None:
            return
        if self.step_tag_id is not None and not (task == "reward" and task in token_rows):
            raise InvalidInputError(
                f"step_tag_id selects the step tokens of STEP pooling (a process reward model's reward); "
                f"this model's {asked} does not pool step tokens",
                param="step_tag_id",
            )
        if self.returned_token_ids is not None and task not in token_rows:
            raise InvalidInputError(
                f"returned_token_ids picks columns of per-token rows (STEP pooling, a token classifier); "
                f"this model's {asked} is one value per text",
                param="returned_token_ids",
            )

    def _check_score_role(self, task: str, facts: ModelFacts) -> None:
        """A similarity score embeds text_1 as the query and text_2 as documents (with
        ``input_type="query"``, in their roles' prompts), so ``"document"`` names no role it can take;
        a cross-encoder reads each pair jointly and has no roles to refuse."""
        if (
            task == "score"
            and self.input_type == "document"
            and facts.score_kind is not ScoreKind.CROSS_ENCODER
        ):
            raise InvalidInputError(
                "a score's input_type names text_1's role: 'query' (text_2 are then documents)",
                param="input_type",
            )

    def _normalize_switch(self, task: str, facts: ModelFacts) -> bool | None:
        """The request's ``normalize`` for ``task``, or an error where the task has no such switch:
        a field that changes nothing must not be answered as if it had been applied."""
        cross_encoder = facts.score_kind is ScoreKind.CROSS_ENCODER
        if task == "score" and not cross_encoder and self.use_activation is not None:
            raise InvalidInputError(
                "use_activation applies to cross-encoder scores; this model scores by "
                f"{facts.score_kind.value} of its vectors",
                param="use_activation",
            )
        vectors = task in VECTOR_TASKS or (task == "score" and not cross_encoder)
        if not vectors:
            if self.normalize is not None:
                raise InvalidInputError(
                    f"normalize applies to vectors, not to task {task!r}; "
                    + (
                        "sparse weights are never normalised"
                        if task == "sparse_embed"
                        else "its switch is use_activation"
                    ),
                    param="normalize",
                )
            return None
        both = self.normalize is not None and self.use_activation is not None
        if both and self.normalize != self.use_activation:
            raise InvalidInputError(
                "normalize and use_activation disagree; on vectors they are the same switch, give one",
                param="use_activation",
            )
        return _first(self.normalize, self.use_activation)


def _check_dimensions(dimensions: int, task: str, facts: ModelFacts) -> None:
    """A size for ``task``: an embedding's, or the token vectors of a late-interaction model (its
    output; another model's token vectors are hidden states, not cut)."""
    if task == "token_embed" and facts.score_kind is not ScoreKind.MAXSIM:
        raise DimensionsError(
            "dimensions applies to token_embed on a late-interaction (ColBERT) model, whose "
            "token vectors are its output; this model's token vectors are hidden states"
        )
    if task not in ("embed", "token_embed"):
        raise DimensionsError(f"dimensions applies to embeddings, not to task {task!r}")
    verify_dimensions(dimensions, facts)


def _first(*values: T | None) -> T | None:
    """The first value that is set: a request's own, then the model's, then the generic default."""
    return next((v for v in values if v is not None), None)


def _returned_token_ids(params: PoolingParams, task: str, defaults: PoolerDefaults) -> tuple[int, ...] | None:
    """Which head columns a reward or token classification returns; checked here, because a pooler
    must never fail a batch other requests share (and a negative id would quietly count from the end)."""
    if task not in ("reward", "token_classify"):
        return None
    returned = (
        params.returned_token_ids if params.returned_token_ids is not None else defaults.returned_token_ids
    )
    if returned is None:
        return None
    columns = defaults.head_columns
    if not returned or any(t < 0 or (columns and t >= columns) for t in returned):
        span = f"[0, {columns})" if columns else "0 and up"
        raise InvalidInputError(
            f"returned_token_ids must be a non-empty list of ids in {span}, got {list(returned)}",
            param="returned_token_ids",
        )
    return returned


def check_dimensions_range(dimensions: object, full: int) -> None:
    """Raise :class:`DimensionsError` unless ``dimensions`` is an integer from 1 to ``full``: the
    sizes a vector of ``full`` components can be cut to (whether the cut keeps its meaning is
    :func:`verify_dimensions`')."""
    if isinstance(dimensions, bool) or not isinstance(dimensions, int):
        raise DimensionsError("dimensions must be an integer")
    if dimensions <= 0 or dimensions > full:
        raise DimensionsError(f"dimensions must be between 1 and {full}, got {dimensions}")


def verify_dimensions(dimensions: object, facts: ModelFacts) -> None:
    """Raise :class:`DimensionsError` unless ``dimensions`` is a size the model's vectors can take.

    The full size is always accepted (it truncates nothing, and OpenAI clients send it); a smaller
    size only on a Matryoshka model, and only a trained size where the model lists them.
    """
    full = facts.embedding_dim or 0
    check_dimensions_range(dimensions, full)
    if dimensions == full:
        return
    if not facts.is_matryoshka:
        raise DimensionsError(
            "this model is not a Matryoshka model, so its vectors cannot be truncated to "
            f"{dimensions} dimensions meaningfully; omit dimensions (full size is {full}), or declare "
            'the model Matryoshka only if it was trained for it (hf_overrides={"is_matryoshka": True}; '
            "on the command line --hf-overrides '{\"is_matryoshka\": true}', or ingest's and "
            "calibrate's --assume-matryoshka)"
        )
    allowed = facts.matryoshka_dimensions
    if allowed is not None and dimensions not in allowed:
        raise DimensionsError(f"dimensions must be one of {list(allowed)}, got {dimensions}")
