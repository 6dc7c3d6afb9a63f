"""Errors poolrag raises for bad requests and bad models.

Every error a caller can cause derives from :class:`PoolragError` and ``ValueError`` (or
``TypeError``), so front doors (the HTTP server, the adapters) can map them to a client error
without catching unrelated bugs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: How much of a name the caller sent (a model, field or prompt name) an error quotes
_SHOWN_NAME_CHARS = 100


def cut_name(name: str) -> str:
    """``name`` cut to its first 100 characters and its length: an error repeats what it names
    in every field of a server's answer, so a 15 MB name would come back as a 45 MB answer."""
    if len(name) <= _SHOWN_NAME_CHARS:
        return name
    return f"{name[:_SHOWN_NAME_CHARS]}... ({len(name)} characters)"


def quoted_name(name: str) -> str:
    """``name`` quoted as ``repr`` does, cut as :func:`cut_name` cuts it."""
    if len(name) <= _SHOWN_NAME_CHARS:
        return repr(name)
    return f"{name[:_SHOWN_NAME_CHARS]!r}... ({len(name)} characters)"


class PoolragError(Exception):
    """Base class of every error poolrag raises on purpose.

    ``param`` names the request field at fault where one is (the server reports it as OpenAI's
    ``error.param``)."""

    param: str | None = None

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        if param is not None:
            self.param = param

    def __reduce__(self) -> tuple[object, ...]:
        """Rebuilt from its message and attributes, not by calling ``__init__`` again (whose
        arguments differ per subclass): errors cross processes in worker pools and Ray."""
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[PoolragError], args: tuple[object, ...], state: dict[str, object]) -> PoolragError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class InvalidInputError(PoolragError, ValueError):
    """The request is malformed: empty text, wrong dimensions, bad parameters."""


#: where an error names its input: at the start of its message, or after one label (the HTTP
#: client's ``/v1/embeddings: input[3]: ...``)
_WHERE = re.compile(r"^(?:\S+: )?(\w+)\[(\d+)\]")


def at_position(error: PoolragError, positions: Sequence[int | str]) -> PoolragError:
    """``error`` naming its input where the caller has it (``input[290]``), when the call that raised
    it saw only a part of the caller's list (``input[34]`` of a client's second request, or of a
    cache's misses): ``positions[i]`` is the caller's index of the part's item ``i``, or its name in
    the caller's words (``inputs.sentences[0]``). An error naming no index is itself."""
    message = str(error.args[0]) if error.args else ""
    found = _WHERE.match(message)
    if found is None or int(found[2]) >= len(positions):
        return error
    place = positions[int(found[2])]
    where = f"{found[1]}[{place}]" if isinstance(place, int) else place
    field, bracket, rest = where.partition("[")
    state = dict(error.__dict__)
    if "index" in state:
        state["index"] = int(rest.rstrip("]")) if bracket else None
    if "field" in state:
        state["field"] = field
    if "name" in state:  # an image's name, ``input[2]``
        state["name"] = where
    if "param" in state:  # an image's param is its name, a text's its field
        state["param"] = where if "[" in str(state["param"]) else field
    renamed = message[: found.start(1)] + where + message[found.end() :]
    return _rebuilt(type(error), (renamed, *error.args[1:]), state)


class InvalidTextError(InvalidInputError):
    """A text (or token-id list) the model cannot read, by :mod:`poolrag.text_validity`'s rule.

    It keeps where the text is (``field``, and ``index`` in a list) apart from why (``problem``),
    so a front door whose fields have other names (``documents`` for the engine's ``text_2``) can
    say the same thing in its own words (:meth:`renamed`)."""

    def __init__(self, field: str, index: int | None, problem: str) -> None:
        super().__init__(f"{field if index is None else f'{field}[{index}]'} {problem}", param=field)
        self.field = field
        self.index = index
        self.problem = problem

    @property
    def empty(self) -> bool:
        """Nothing to read (as opposed to text that is not Unicode)."""
        return self.problem.startswith("is empty")

    def renamed(self, field: str, index: int | None) -> InvalidTextError:
        """The same problem, found at ``field`` (``field[index]``)."""
        return InvalidTextError(field, index, self.problem)


class InvalidImageError(InvalidInputError):
    """An image input that cannot be read, named as the caller named it (``input[2]``), so a front
    door whose fields have other names can say it in its own words (:meth:`renamed`)."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}", param=name)
        self.name = name
        self.problem = problem

    def renamed(self, fields: dict[str, str]) -> InvalidImageError:
        """The same problem, its field renamed by ``fields`` (``text_2[1]`` -> ``documents[1]``)."""
        field, bracket, rest = self.name.partition("[")
        return InvalidImageError(fields.get(field, field) + bracket + rest, self.problem)


class InputTypeError(PoolragError, TypeError):
    """An input that is not text (or token ids) was passed where text was expected."""


def served_here(runners: Sequence[str] | None) -> str:
    """The end of a task refusal naming the served models that run the task (``runners``), or that
    none does; ``None`` (one model served) adds nothing."""
    if runners is None:
        return ""
    names = ", ".join(repr(name) for name in runners)
    return f"; served here for it: {names}" if runners else "; no model served here runs it"


class UnsupportedTaskError(InvalidInputError):
    """The model cannot run the requested pooling task."""

    def __init__(
        self,
        task: str,
        supported: tuple[str, ...],
        model: str | None = None,
        runners: Sequence[str] | None = None,
    ) -> None:
        hint = ""
        if task == "score" and "classify" in supported:  # a two-label "reranker" (relevant / not)
            hint = (
                "; a sequence classifier scores pairs as a cross-encoder only with one label, and this "
                "one has several: Engine.classify_pairs gives each label's score for a pair"
            )
        if task == "token_classify" and "classify" in supported:  # vLLM's --convert classify
            hint = "; a sequence classifier: load it with convert='classify' to run its head on every token"
        hint += served_here(runners)
        who = f"model {model!r}" if model else "this model"
        super().__init__(
            f"task {task!r} is not supported by {who}; supported tasks: {', '.join(supported) or 'none'}"
            + hint
        )
        self.task = task
        self.supported = supported

    def naming(self, model: str, runners: Sequence[str] | None = None) -> UnsupportedTaskError:
        """The same refusal naming the model by its served name and, where a server serves several,
        the others that run the task (``runners``): with several, "this model" does not say which
        one answered a request that named none."""
        return UnsupportedTaskError(self.task, self.supported, model, runners)


class InputTooLongError(InvalidInputError):
    """An input exceeds the model's maximum length and truncation was not requested.

    Named where it is (``input[3]`` of a batch) as :class:`InvalidTextError` is, so one long
    paragraph among a client's 96 texts can be found; :meth:`renamed` says it in a front door's
    field names."""

    field: str = "input"
    index: int | None = None

    def __init__(
        self,
        num_tokens: int,
        max_len: int,
        field: str = "input",
        index: int | None = None,
        remedy: str = "shorten it or pass truncate_prompt_tokens to truncate",
    ) -> None:
        where = field if index is None else f"{field}[{index}]"
        super().__init__(
            f"{where} has {num_tokens} tokens, more than the model's maximum of {max_len}; {remedy}",
            param=field,
        )
        self.num_tokens = num_tokens
        self.max_len = max_len
        self.field = field
        self.index = index
        self.remedy = remedy

    @property
    def where(self) -> str:
        """``field`` or ``field[index]``: the input at fault."""
        return self.field if self.index is None else f"{self.field}[{self.index}]"

    def renamed(self, field: str, index: int | None) -> InputTooLongError:
        """The same length, found at ``field`` (``field[index]``)."""
        return InputTooLongError(self.num_tokens, self.max_len, field, index, self.remedy)


class DimensionsError(InvalidInputError):
    """Matryoshka ``dimensions`` that the model does not support (``param`` is that field, as
    the server reports it, for a caller of the engine too)."""

    param: str | None = "dimensions"


class ModelLoadError(PoolragError, RuntimeError):
    """The model folder could not be understood or loaded."""


class GenerativeCheckpointError(ModelLoadError):
    """A text-generation checkpoint (``*ForCausalLM``) loaded with no pooling conversion asked for:
    refused rather than pooled by a guess; ``LLM(runner="pooling")`` converts it to embed, as vLLM."""


class OutOfMemoryError(PoolragError, RuntimeError):
    """One sequence ran out of memory in a batch of its own (larger batches are split and retried
    first): the call fails with it alone, and the engine goes on serving the next one. A
    ``RuntimeError``, as torch's own out-of-memory errors are (``MemoryError`` cannot be pickled
    back from a worker process)."""


class EngineClosedError(PoolragError, RuntimeError):
    """The engine was closed (``Engine.close()``, or garbage-collected); it accepts no more work."""
