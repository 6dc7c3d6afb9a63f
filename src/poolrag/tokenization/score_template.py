"""Score templates: the prompt an LLM reranker expects around a (query, document) pair.

Decoder rerankers were trained on one exact prompt (a chat turn, "A: ... B: ..."); a pair fed
to them any other way scores noise. A template is Jinja text with ``query`` and ``document``
(and, optionally, ``instruction``), or a template written for vLLM as it ships: vLLM renders a
pair as ``messages``, a query turn then a document turn (``role`` "query" / "document",
``content``), so both spellings are given to every template. The ones for Qwen3-Reranker,
bge-reranker-v2-gemma and mxbai-rerank-v2 ship with poolrag under their names. Templates are
rendered in a sandbox because per-call templates may come from HTTP clients.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from poolrag.errors import InputTooLongError, InvalidInputError
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.tokenization.input_processor import token_limit
from poolrag.tokenization.text_cut import TextCut
from poolrag.tokenization.tokenizer_lock import call_tokenizer

logger = logging.getLogger(__name__)

# Both keep the trailing newline; _compile drops one where Jinja's default would (_final_newline).
_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
# vLLM renders its templates as transformers renders chat templates (block tags trimmed, undefined
# names empty), so a file written for it renders here byte for byte as there.
_VLLM_ENV = ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, autoescape=False, keep_trailing_newline=True
)
_REQUIRED = frozenset({"query", "document"})
_VLLM_PAIR = "messages"  # vLLM's variable: [{"role": "query", ...}, {"role": "document", ...}]


def shipped_score_templates() -> tuple[str, ...]:
    """Names of the templates shipped in ``poolrag/templates``."""
    folder = resources.files("poolrag") / "templates"
    return tuple(sorted(p.name[: -len(".jinja")] for p in folder.iterdir() if p.name.endswith(".jinja")))


def _final_newline(source: str) -> str:
    """``source`` without the newline that ends its last line, as Jinja's default reads it."""
    return source[:-2] if source.endswith("\r\n") else source.removesuffix("\n")


@functools.lru_cache(maxsize=64)
def _compile(source: str, from_file: bool = False):  # type: ignore[no-untyped-def]
    """A template typed as text in poolrag's form keeps what it ends with (the Qwen3-Reranker
    card's suffix ends ``"</think>\\n\\n"``; Jinja's default would drop the last newline and move
    the score). A file's final newline is its editor's, and vLLM's form renders as transformers
    renders it: those drop one, as Jinja does by default."""
    try:
        parsed = _ENV.parse(source)
    except TemplateError as exc:
        raise InvalidInputError(f"score template is not valid Jinja: {exc}") from exc
    used = meta.find_undeclared_variables(parsed)
    missing = _REQUIRED - used
    if missing and _VLLM_PAIR not in used:
        raise InvalidInputError(
            "a score template must use {{ query }} and {{ document }} (or vLLM's {{ messages }}); "
            f"missing {sorted(missing)}"
        )
    if _VLLM_PAIR in used:
        return _VLLM_ENV.from_string(_final_newline(source))
    return _ENV.from_string(_final_newline(source) if from_file else source)


@dataclass(frozen=True, slots=True)
class ScoreTemplate:
    """A compiled pair template plus fixed variables (e.g. a task ``instruction``)."""

    source: str
    name: str | None = None
    variables: Mapping[str, object] = field(default_factory=dict)
    from_file: bool = False  # read from a .jinja file: its final newline is dropped, as Jinja does

    def __post_init__(self) -> None:
        _compile(self.source, self.from_file)  # fail at construction, not at the first request

    def with_variables(self, **variables: object) -> ScoreTemplate:
        """The same template with extra variables, e.g. ``instruction="Find the law that..."``."""
        if (_REQUIRED | {_VLLM_PAIR}) & set(variables):
            raise InvalidInputError(
                "query, document and messages are given per pair, not as template variables"
            )
        return replace(self, variables={**self.variables, **variables})

    def render(self, query: str, document: str) -> str:
        try:
            messages = [{"role": "query", "content": query}, {"role": "document", "content": document}]
            return _compile(self.source, self.from_file).render(
                **self.variables, query=query, document=document, messages=messages
            )
        except TemplateError as exc:
            raise InvalidInputError(f"score template {self.name or ''} failed to render: {exc}") from exc


def load_score_template(value: str | ScoreTemplate | Mapping[str, object]) -> ScoreTemplate:
    """A shipped template name, a path to a ``.jinja`` file, Jinja text itself, or a
    :class:`ScoreTemplate`'s fields (as a serialised adapter's ``engine_kwargs`` hold one)."""
    if isinstance(value, ScoreTemplate):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(ScoreTemplate.__dataclass_fields__))
        if unknown or not isinstance(value.get("source"), str):
            raise InvalidInputError(
                f"a score_template mapping takes source, name, variables and from_file; got {sorted(value)}"
            )
        return ScoreTemplate(**value)  # type: ignore[arg-type]
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("score_template must be a template name, a .jinja path or Jinja text")
    if value in shipped_score_templates():
        source = (resources.files("poolrag") / "templates" / f"{value}.jinja").read_text(encoding="utf-8")
        return ScoreTemplate(source, name=value, from_file=True)
    if value.endswith(".jinja") and "\n" not in value:
        path = Path(value).expanduser()
        if not path.is_file():
            raise InvalidInputError(f"score template file {value!r} does not exist")
        return ScoreTemplate(path.read_text(encoding="utf-8"), name=path.stem, from_file=True)
    if "{{" not in value:
        raise InvalidInputError(
            f"unknown score template {value!r}; shipped: {', '.join(shipped_score_templates())}, "
            "or pass Jinja text using {{ query }} and {{ document }} (or vLLM's {{ messages }})"
        )
    return ScoreTemplate(value)


def templated_pair_requests(
    tokenizer: object,
    template: ScoreTemplate,
    pairs: Sequence[tuple[str, str]],
    params: ResolvedParams,
    max_len: int,
    truncate: int | None,
    text_cut: TextCut | None = None,
) -> list[PoolingRequest]:
    """Render and tokenise each pair (checked already: ``InputProcessor.checked_pairs``) in one
    batched call.

    Too long and truncation allowed: the *document* is shortened, never the template's tail,
    because the tail (the question the model answers) is where the score is read. With
    ``text_cut``, a document is first cut to ``limit`` tokens of its own (what can be kept of it
    at most), so megabytes of text are never tokenised whole.
    """
    limit = token_limit(truncate, max_len)
    if limit is not None and text_cut is not None:
        pairs = [(query, text_cut.prefix(document, limit)) for query, document in pairs]
    texts = [template.render(query, document) for query, document in pairs]
    encoded = call_tokenizer(tokenizer, texts, add_special_tokens=True, return_attention_mask=False)[
        "input_ids"
    ]
    requests: list[PoolingRequest] = []
    for (query, document), ids in zip(pairs, encoded, strict=True):
        cut = len(ids) > max_len or (limit is not None and len(ids) > limit)
        if cut:
            if limit is None:
                raise InputTooLongError(len(ids), max_len)
            ids = _shorten_document(tokenizer, template, query, document, len(ids), limit)
        requests.append(PoolingRequest(token_ids=tuple(ids), params=params, truncated=cut))
    return requests


def _shorten_document(
    tokenizer: object, template: ScoreTemplate, query: str, document: str, length: int, limit: int
) -> list[int]:
    doc_ids = call_tokenizer(tokenizer, document, add_special_tokens=False)["input_ids"]
    keep = len(doc_ids) - (length - limit)
    for _ in range(4):  # re-tokenising at the cut can move a token or two across the boundary
        if keep <= 0:
            raise InvalidInputError(
                f"the score template and query alone take more than {limit} tokens; shorten the query"
            )
        text = template.render(query, tokenizer.decode(doc_ids[:keep]))  # type: ignore[attr-defined]
        ids = call_tokenizer(tokenizer, text, add_special_tokens=True)["input_ids"]
        if len(ids) <= limit:
            return list(ids)
        keep -= len(ids) - limit
    raise InvalidInputError(f"could not fit the templated pair into {limit} tokens")
