"""Checks every endpoint applies before the engine sees a request (input count, shape), and the
routes' names for the texts the engine checks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from poolrag.errors import (
    InputTooLongError,
    InputTypeError,
    InvalidImageError,
    InvalidInputError,
    InvalidTextError,
)
from poolrag.model_facts import ModelFacts
from poolrag.params import PoolingParams
from poolrag.server.errors import APIError
from poolrag.server.schemas import ChatFormBody, RerankRequest, ScoreRequest
from poolrag.server.settings import ServerSettings


@contextmanager
def fields_named(**fields: str) -> Iterator[None]:
    """Inside, the engine's text errors (an empty, non-Unicode or over-long text, found by its input stage)
    and its token-id errors (an id out of the vocabulary, ids of another tokenizer) name this route's
    fields, e.g. ``text_2="documents"``: ``documents[3] is empty``, not ``text_2[3] is empty``;
    ``input="inputs"``: TEI's ``inputs[0]: token ids must be in ...``. The engine's own names
    (``input``, ``text_1``, ``text_2``) need none."""
    try:
        yield
    except (InvalidTextError, InputTooLongError) as error:
        raise error.renamed(fields.get(error.field, error.field), error.index) from None
    except InvalidImageError as error:  # a page given as a document: documents[1], not text_2[1]
        raise error.renamed(fields) from None
    except (InvalidInputError, InputTypeError) as error:  # a token-id list's: input[1]: token ids ...
        field, message = error.param or "", str(error)
        named_here = message.startswith((f"{field}[", f"{field}:"))
        if type(error) not in (InvalidInputError, InputTypeError) or field not in fields or not named_here:
            raise
        raise type(error)(fields[field] + message.removeprefix(field), param=fields[field]) from None


def chat_prompt(body: ChatFormBody, facts: ModelFacts) -> str:
    """The one input of a chat-form body: its one text or image, to a model that reads images (vLLM
    renders messages with the model's chat template; poolrag has none)."""
    if not facts.reads_images:
        if body.chat_field == "input":
            raise InvalidInputError(
                "input: chat messages need a chat template, which poolrag does not apply, and this "
                "model reads text only; send the texts themselves as input",
                param="input",
            )
        raise InvalidInputError(
            "messages: this model reads text only and poolrag applies no chat template; send input",
            param="messages",
        )
    return body.message_part()[1]


@contextmanager
def messages_named(body: ChatFormBody) -> Iterator[None]:
    """Inside, an error the engine names ``input`` names the part of ``messages`` it came from."""
    try:
        yield
    except InvalidInputError as exc:
        if body.messages is None or not str(exc).startswith("input"):
            raise
        name, _ = body.message_part()
        raise InvalidInputError(name + str(exc).removeprefix("input"), param="messages") from None


def check_input_count(settings: ServerSettings, count: int, param: str) -> None:
    """A list of inputs in a request: not empty, and at most ``--max-inputs`` long (a count the
    caller passes, such as ``top_n``, is :func:`poolrag.counts.check_count`'s)."""
    if count == 0:
        raise APIError(400, f"{param} must not be empty", param=param, code="empty_input")
    if count > settings.max_inputs:
        raise APIError(
            400,
            f"{param} has {count} items, more than this server's limit of {settings.max_inputs} per request",
            param=param,
            code="too_many_inputs",
        )


def to_prompts(value: str | Sequence[Any], settings: ServerSettings, param: str = "input") -> Any:
    """OpenAI's ``input`` forms as engine prompts: texts stay texts, token ids become token prompts;
    one input stays one (the engine names it ``input``, an item of a list ``input[i]``)."""
    if isinstance(value, str):
        return value
    items = list(value)
    if items and all(isinstance(t, int) for t in items):  # one list of token ids
        return {"prompt_token_ids": items}
    check_input_count(settings, len(items), param)
    return [{"prompt_token_ids": item} if isinstance(item, list) else item for item in items]


def input_count(prompts: Any) -> int:
    """How many inputs :func:`to_prompts` gave."""
    return len(prompts) if isinstance(prompts, list) else 1


def score_params(body: ScoreRequest | RerankRequest, facts: ModelFacts) -> PoolingParams:
    """``/score`` and ``/rerank`` parameters, checked before the request takes a slot (a cosine or
    MaxSim score has no activation to switch off; a cut over the model's length is vLLM's 400)."""
    params = PoolingParams(
        truncate_prompt_tokens=body.cut_for(facts), use_activation=body.use_activation, truncate=body.truncate
    )
    params.verify("score", facts)
    return params
