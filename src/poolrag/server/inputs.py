"""Checks every endpoint applies before the engine sees a request: model name, input count, shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from poolrag.model_facts import ModelFacts
from poolrag.params import PoolingParams
from poolrag.server.errors import APIError
from poolrag.server.settings import ServerSettings
from poolrag.text_validity import has_visible_text, text_problem


def is_blank(text: str) -> bool:
    """Nothing to read (empty, whitespace, control or invisible format characters only), by the
    rule every front door applies (:mod:`poolrag.text_validity`)."""
    return not has_visible_text(text)


def refuse_blank(value: str | Sequence[Any], param: str) -> None:
    """The 400 ``empty_input`` for the first text (or token-id list) with nothing to read, named
    with its index (``text_2[3] is empty``). Every route asks here before the engine does, so the
    same mistake gets the same code and ``param`` on every route."""
    if isinstance(value, str):
        if is_blank(value):
            raise APIError(400, f"{param} {text_problem(value)}", param=param, code="empty_input")
        return
    for i, item in enumerate(value):
        if isinstance(item, str) and is_blank(item):
            problem = text_problem(item)  # a blank text has no lone surrogate: this says how it is empty
        elif isinstance(item, list) and not item:
            problem = "is empty (no token ids)"
        else:
            continue
        raise APIError(400, f"{param}[{i}] {problem}", param=param, code="empty_input")


def check_count(settings: ServerSettings, count: int, param: str) -> None:
    if count == 0:
        raise APIError(400, f"{param} must not be empty", param=param, code="empty_input")
    if count > settings.max_inputs:
        raise APIError(
            400,
            f"{param} has {count} items, more than this server's limit of {settings.max_inputs} per request",
            param=param,
            code="too_many_inputs",
        )


def to_prompts(value: str | Sequence[Any], settings: ServerSettings, param: str = "input") -> list[Any]:
    """OpenAI's ``input`` forms as engine prompts: texts stay texts, token ids become token prompts."""
    if isinstance(value, str):
        refuse_blank(value, param)
        return [value]
    items = list(value)
    if items and all(isinstance(t, int) for t in items):  # one list of token ids
        return [{"prompt_token_ids": items}]
    check_count(settings, len(items), param)
    refuse_blank(items, param)
    return [{"prompt_token_ids": item} if isinstance(item, list) else item for item in items]


def score_params(
    facts: ModelFacts,
    truncate_prompt_tokens: int | None,
    use_activation: bool | None,
    truncate: bool | None = None,
) -> PoolingParams:
    """``/score`` and ``/rerank`` parameters, checked before the request takes a slot (a cosine or
    MaxSim score has no activation to switch off)."""
    params = PoolingParams(
        truncate_prompt_tokens=truncate_prompt_tokens, use_activation=use_activation, truncate=truncate
    )
    params.verify("score", facts)
    return params
