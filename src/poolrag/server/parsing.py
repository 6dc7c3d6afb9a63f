"""Parse and validate a request body with bounded time and memory, on a worker thread.

FastAPI would run ``json.loads`` and pydantic on the event loop, where a 16 MB list of token ids
stalled every connection (``/health`` included) for seconds. Here the body goes through, in order:

1. a byte-level bound on the number of JSON values (commas and brackets, C-speed), so a body
   holding millions of values is refused before it is parsed;
2. ``json.loads``, whose time is bounded by step 1;
3. a count of the token ids and characters of text it holds, against the request limits;
4. pydantic validation (linear in the input: see ``schemas._homogeneous_lists``).

:func:`parse_body` is synchronous, meant for a worker thread (or the loop, for a small body); it raises
:class:`APIError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from poolrag.server.errors import APIError, from_validation_error
from poolrag.server.settings import Limits

M = TypeVar("M", bound=BaseModel)

#: JSON strings (with escapes), removed to count the commas outside them. The closing quote is
#: optional so that a string left open matches to the end once, in linear time: with it required,
#: every quote of a body such as ``{"input":"\",\",...`` rescans the rest (quadratic).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?')
#: Values a request may hold besides its token ids and inputs (other fields, nested objects).
_VALUE_SLACK = 1024
#: Characters per token assumed when estimating the tokens of a text for admission.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Parsed:
    """A validated body and what it costs: token ids and characters of text it carries."""

    body: BaseModel
    token_ids: int
    chars: int
    text_lengths: tuple[int, ...] = ()  # each string's characters

    @property
    def tokens(self) -> int:
        """Token ids plus the estimated tokens of its text: its weight in the admission budget."""
        return self.token_ids + -(-self.chars // CHARS_PER_TOKEN)

    def tokens_within(self, text_cap: int | None) -> int:
        """:attr:`tokens` with each text's estimate at most ``text_cap``, the most one text puts in
        flight (the model's length: a 9 MiB text cut to 256 tokens weighed 2.4 M and shut the
        model's other clients out); ``None``: uncapped."""
        if text_cap is None:
            return self.tokens
        texts = sum(min(-(-n // CHARS_PER_TOKEN), text_cap) for n in self.text_lengths)
        return self.token_ids + texts


def _too_large(what: str, count: int, limit: int, flag: str) -> APIError:
    return APIError(
        413,
        f"request holds {count} {what}, more than this server's limit of {limit} per request "
        f"({flag}): split the inputs over several requests",
    )


def _value_bound(raw: bytes) -> int:
    """An upper bound on the JSON values ``raw`` holds (each value but the first per array or
    object follows a comma)."""
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1


def _check_value_count(raw: bytes, limits: Limits) -> None:
    allowed = limits.max_request_tokens + limits.max_inputs + _VALUE_SLACK
    if _value_bound(raw) <= allowed:
        return
    outside_strings = _JSON_STRING.sub(b'""', raw)  # commas inside texts are not values
    count = _value_bound(outside_strings)
    if count > allowed:
        raise _too_large("JSON values", count, allowed, "--max-request-tokens")


def _measure(value: object) -> tuple[int, list[int]]:
    """Token ids (integers in lists) and each string's characters anywhere in a parsed body."""
    token_ids = 0
    lengths: list[int] = []
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            lengths.append(len(item))  # type: ignore[arg-type]
        elif kind is list:
            ints = sum(type(x) is int for x in item)  # type: ignore[union-attr]
            token_ids += ints
            if ints != len(item):  # type: ignore[arg-type]
                stack.extend(x for x in item if type(x) is not int)  # type: ignore[union-attr]
        elif kind is dict:
            stack.extend(item.values())  # type: ignore[union-attr]
    return token_ids, lengths


def parse_body(raw: bytes, model: type[M], limits: Limits) -> Parsed:
    """``raw`` as a validated ``model``, or the :class:`APIError` to answer."""
    _check_value_count(raw, limits)
    try:
        data = json.loads(raw)
    except RecursionError:
        raise APIError(
            400, "the request body is not valid JSON: nested too deeply", code="invalid_json"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # the latter: bytes that are not UTF-8
        raise APIError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    except ValueError:  # an integer past Python's digit limit, whose message names sys internals
        raise APIError(400, "a number in the request body has too many digits") from None
    token_ids, lengths = _measure(data)
    chars = sum(lengths)
    check_size(token_ids, chars, limits)
    try:
        body = model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    return Parsed(body, token_ids, chars, tuple(lengths))


def check_size(token_ids: int, chars: int, limits: Limits) -> None:
    """The 413 for a request over ``limits``' per-request token ids or characters of text; run
    again with the limits of the model a request names, once its body is parsed."""
    if token_ids > limits.max_request_tokens:
        raise _too_large("token ids", token_ids, limits.max_request_tokens, "--max-request-tokens")
    if chars > limits.max_request_chars:
        raise _too_large("characters of text", chars, limits.max_request_chars, "--max-request-chars")
