"""Errors of the HTTP client, mapped onto poolrag's own so callers catch one family.

A request the server rejects as bad input raises :class:`RemoteInvalidInputError`, a ``ValueError``
like the in-process engine's errors, and of the engine's own kind where the server's error code
names one (an over-long input is an ``InputTooLongError`` too), so code written against ``Engine``
handles both the same way.
"""

from __future__ import annotations

import re

from poolrag.client.wire import error_field
from poolrag.errors import (
    DimensionsError,
    InputTooLongError,
    InvalidInputError,
    InvalidTextError,
    PoolragError,
    UnsupportedTaskError,
)


class RemoteError(PoolragError, RuntimeError):
    """The server could not be reached or failed on its side (auth, overload, 5xx)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class RemoteConnectionError(RemoteError, ConnectionError):
    """No answer came: the server could not be reached, or closed the connection before its
    answer ended (after the client's retries). A ``ConnectionError`` as well, so a retry policy
    written for network errors (``tenacity``'s ``retry_if_exception_type(ConnectionError)``, or
    openai's ``APIConnectionError`` handling) tells it from a server that answered with an error."""


class RemoteTimeoutError(RemoteError, TimeoutError):
    """The server did not answer within the client's ``timeout`` (busy, or a large request); a
    ``TimeoutError`` as well, as openai's ``APITimeoutError`` is its own class."""


class RemoteInvalidInputError(InvalidInputError):
    """The server rejected the request as invalid (HTTP 400, 413 or 422), or named a model it does
    not serve (``404 model_not_found``)."""

    def __init__(self, message: str, status_code: int, param: str | None = None) -> None:
        InvalidInputError.__init__(self, message, param=param)  # not a subclass's own arguments
        self.status_code = status_code


class RemoteInputTooLongError(RemoteInvalidInputError, InputTooLongError):
    """An input over the model's length, refused by the server (``context_length_exceeded``)."""


#: the server's words for a text it cannot read, after the client's ``/v1/embeddings: `` label:
#: where (``input``, ``input[3]``) and what (``is empty (no token ids)``)
_TEXT_PROBLEM = re.compile(r"^(?:\S+: )?([\w.]+)(?:\[(\d+)\])? (.+)$", re.DOTALL)


class RemoteInvalidTextError(RemoteInvalidInputError, InvalidTextError):
    """A text the model cannot read (empty, not Unicode), refused by the server (``empty_input``).

    It has the engine's :class:`InvalidTextError` attributes (``field``, ``index``, ``problem``,
    ``empty``, :meth:`renamed`), read from the server's message, so code that handles the engine's
    error handles this one."""

    def __init__(self, message: str, status_code: int, param: str | None = None) -> None:
        super().__init__(message, status_code, param)
        found = _TEXT_PROBLEM.match(message)
        self.field = found[1] if found else (param or "input")
        self.index = int(found[2]) if found and found[2] is not None else None
        self.problem = found[3] if found else message


class RemoteUnsupportedTaskError(RemoteInvalidInputError, UnsupportedTaskError):
    """A task the served model does not run (``unsupported_task``)."""


class RemoteDimensionsError(RemoteInvalidInputError, DimensionsError):
    """Matryoshka dimensions the served model does not take (``invalid_dimensions``)."""


class RemoteAnswerTooLargeError(RemoteInvalidInputError):
    """A per-token answer over the server's ``--max-answer-values`` (``answer_too_large``): the
    client sends the request again in halves, so only one input alone can raise it."""


class RemoteRequestTooLargeError(RemoteInvalidInputError):
    """A request over the server's ``--max-body-bytes``, ``--max-request-chars`` or
    ``--max-request-tokens`` (``request_too_large``): the client sends it again in halves, since
    it cannot count the server's tokens, so only one input alone can raise it."""


#: the server's error code -> what the client raises, so ``except InputTooLongError`` catches the
#: remote refusal as it catches the engine's
_BY_CODE: dict[str | None, type[RemoteInvalidInputError]] = {
    "context_length_exceeded": RemoteInputTooLongError,
    "empty_input": RemoteInvalidTextError,
    "unsupported_task": RemoteUnsupportedTaskError,
    "invalid_dimensions": RemoteDimensionsError,
    "answer_too_large": RemoteAnswerTooLargeError,
    "request_too_large": RemoteRequestTooLargeError,
}


def remote_input_error(message: str, status_code: int, body: object) -> RemoteInvalidInputError:
    """The error for a refused request: of the engine's own kind where the body's OpenAI-shaped
    ``error.code`` names one."""
    kind = _BY_CODE.get(error_field(body, "code"), RemoteInvalidInputError)
    return kind(message, status_code, error_field(body, "param"))


class ServedModelChangedError(InvalidInputError):
    """The server now serves other weights (or pools them differently) than the facts this client
    read: it restarted with another model under the same name and URL. The client drops its facts,
    so the next call reads the new ones; what was keyed on the old facts (cache entries, a
    collection) belongs to the old model."""
