"""A thin HTTP client for ``poolrag serve``: the :class:`~poolrag.backend.PoolingEngine` of a remote model.

Caches, ingestion, retrieval and the framework adapters take a PoolingBackend; this client is the
remote one, with the same methods, result types (``embed_array`` returns the same ``[N, D]`` float32
array as ``Engine.embed_array``) and facts (read once from the server's ``GET /v1/models``), so
they do not care whether the model runs in their process. Parameters are checked against those
facts before anything is sent, by the rule the engine applies, so a bad request raises the same
error locally as in process. Every answer names the served weights (a response header); when they
are no longer those of the kept facts (the server restarted with another model under the same
name), the answer is refused with :class:`ServedModelChangedError` and the facts are read afresh
on the next call, so nothing computed by one model is filed under another's facts. Large inputs
are split into requests of at most ``max_inputs_per_request`` items (or the server's own limit,
on its model card, where lower) and ``MAX_REQUEST_BYTES`` of text, and a request the server still
refuses for its size (its character or token limit, which the client cannot count) is sent again in
halves; the server batches them by token budget like the engine does. ``rerank`` is one request,
since its order (and a fusion) needs every score at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import itertools
import json
import logging
import math
import os
import random
import ssl
import threading
import time
import urllib.parse
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import numpy as np

from poolrag.client import wire
from poolrag.client.errors import (
    RemoteAnswerTooLargeError,
    RemoteConnectionError,
    RemoteError,
    RemoteRequestTooLargeError,
    RemoteTimeoutError,
    ServedModelChangedError,
    remote_input_error,
)
from poolrag.client.loop_clients import LoopClients
from poolrag.client.wire import RerankedDocument
from poolrag.counts import check_count
from poolrag.errors import InputTypeError, InvalidInputError, UnsupportedTaskError, at_position
from poolrag.input_shapes import item_list, prompt_list, score_pairs
from poolrag.model_facts import ModelFacts, answering_model, naming_served
from poolrag.outputs import (
    ClassificationOutput,
    EmbeddingOutput,
    PoolingOutput,
    PoolingRequestOutput,
    ScoringOutput,
)
from poolrag.params import PoolingParams, PoolingTask
from poolrag.prompt_inputs import Prompts, ScoreSide
from poolrag.request import ResolvedParams
from poolrag.sparse.vector import SparseVector
from poolrag.text_validity import check_text

logger = logging.getLogger(__name__)

#: a request refused as bad input (an ``InvalidInputError``), as is a ``404 model_not_found``: a
#: model name the server does not serve, which the client's own check refuses in the same words
_CLIENT_ERRORS = (400, 413, 422)
#: a server at capacity or stopping (which did not run the request), or a proxy in front of it that
#: lost it: sent again (every call is idempotent: the same inputs give the same outputs)
_RETRIED = (429, 502, 503, 504)
#: the text one request carries at most: half of the server's default body limit (16 MiB), leaving
#: room for JSON's escapes, so long documents are split by size as well as by count
MAX_REQUEST_BYTES = 8 * 2**20
_JSON = {"Content-Type": "application/json"}
_MAX_INPUTS, _MAX_QUEUE = "max_inputs_per_request", "max_queue"  # a model card's limits the client keeps
#: a request refused for its size or its answer's: sent again in halves
_HALVED = (RemoteAnswerTooLargeError, RemoteRequestTooLargeError)
#: the longest a ``Retry-After`` is waited for
MAX_RETRY_WAIT_S = 60.0
#: the longest one step of the backoff (0.5 s, doubling) waits, however many retries are allowed
MAX_BACKOFF_S = 8.0
Item = TypeVar("Item")
Out = TypeVar("Out", EmbeddingOutput, ClassificationOutput, PoolingOutput)
#: One HTTP request's body and how many results it asks for.
Requests = list[tuple[dict[str, Any], int]]


#: every live client, for the fork handler
_CLIENTS: weakref.WeakSet[PoolragClient] = weakref.WeakSet()
#: the connection pools a forked child inherited, kept from garbage collection: closing them there
#: would end the parent's TLS sessions (a close_notify on its sockets)
_INHERITED: list[object] = []


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._leave_parents_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _backoff(attempt: int) -> float:
    """0.5 s, doubling up to ``MAX_BACKOFF_S``, less up to a quarter at random: the clients one
    restart cut off come back spread out, not all in the same instant."""
    return min(0.5 * 2**attempt, MAX_BACKOFF_S) * (1 - 0.25 * random.random())


def _retry_after_s(value: str | None) -> float:
    """The seconds a ``Retry-After`` asks for, in either of its forms (RFC 9110): a number of
    seconds, or an HTTP date (a date past is 0 s); NaN when absent or neither."""
    if value is None:
        return math.nan
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return math.nan
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def _untrusted_certificate(exc: BaseException) -> bool:
    """Whether ``exc`` (httpx's, wrapping httpcore's, wrapping ssl's) is a failed certificate check."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _check_timeout(timeout: object) -> None:
    """``timeout=`` checked when the client is made: httpx reads 0 as "do not wait" (every call
    then says the server cannot be reached) and refuses a negative or NaN one only at the first
    request, in its own words."""
    if timeout is None or isinstance(timeout, httpx.Timeout):
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise InvalidInputError(
            f"timeout must be a number of seconds above 0, None (wait without end) or an httpx.Timeout, "
            f"got {timeout!r}"
        )


def _tls_verify(verify: bool | str | os.PathLike[str]) -> bool | ssl.SSLContext:
    """``verify=`` as httpx takes it: a CA bundle's path as an SSL context (httpx 0.28 deprecates
    the path), read now so that a wrong path is said when the client is made."""
    if isinstance(verify, bool):
        return verify
    if not isinstance(verify, (str, os.PathLike)):
        raise InvalidInputError(
            f"verify must be True, False or a CA bundle's path, not {type(verify).__name__}"
        )
    try:
        return ssl.create_default_context(cafile=os.fspath(verify))
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInputError(
            f"verify={os.fspath(verify)!r} is not a readable PEM CA bundle: {exc}"
        ) from None


def _sparse_vector(entries: np.ndarray) -> SparseVector:
    return SparseVector(entries["index"], entries["value"])


class PoolragClient:
    """A :class:`~poolrag.backend.PoolingEngine` over ``/v1/embeddings``, ``/classify``, ``/score``,
    ``/pooling`` and ``/tokenize`` (and ``/rerank``), sync and async: the engine's task methods
    with its result types (``prompt_token_ids`` are known only for token prompts).

    Args:
        base_url: the server's root, e.g. ``http://127.0.0.1:8000`` (a trailing ``/v1`` is accepted).
        api_key: sent as a bearer token; defaults to ``$POOLRAG_API_KEY``.
        model: the served model name, or another the server takes for it (the folder given to
            ``poolrag serve``, as vLLM names a model served from a path; a hub id's short name).
            ``None`` (or ``""``): the model the server answers each task with when a
            request names none (:func:`~poolrag.model_facts.answering_model`: the first that runs it;
            for scores, the first cross-encoder), named in the requests so both sides agree.
        task: the task this client runs when a call does not say (an adapter's): whose facts
            :attr:`facts` reads when ``model`` is ``None`` and the server serves several models.
        timeout: seconds each step of an HTTP request (connecting, sending, each read of the answer)
            may wait: a server that stalls is said after it; one that trickles its answer is not cut.
            ``None`` waits without end; an ``httpx.Timeout`` sets each step's apart.
        max_inputs_per_request: inputs per HTTP request (fewer where the server's card says it
            takes fewer: ``--max-inputs``); longer lists (or more than ``MAX_REQUEST_BYTES`` of
            text) are split and concatenated.
        max_concurrency: how many of one call's requests (a long list split as above) an async
            method keeps in flight at once; separate concurrent calls each send their own.
        max_retries: how many times a request answered 429 or 503 (at capacity, or shutting down:
            not run), or a proxy's 502 / 504, is sent again, after the answer's ``Retry-After``, and
            one whose connection was refused or lost before the answer ended (a server restarting)
            is sent again, after 0.5 s doubling up to ``MAX_BACKOFF_S``; ``0`` raises at once.
        verify: whether to check an ``https`` server's certificate, or the CA bundle (a PEM file's
            path, e.g. a self-signed server's own certificate) to check it with; ``$SSL_CERT_FILE``
            is read too.
        uds: the Unix domain socket of a ``poolrag serve --uds PATH`` to connect through;
            ``base_url`` then names the host the requests carry (``http://localhost``).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        model: str | None = None,
        timeout: float | httpx.Timeout | None = 120.0,
        max_inputs_per_request: int = 256,
        max_concurrency: int = 4,
        task: str | None = None,
        max_retries: int = 2,
        verify: bool | str | os.PathLike[str] = True,
        uds: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidInputError(f"base_url must be an http(s) URL, got {base_url!r}")
        try:
            parsed = httpx.URL(base_url)
        except httpx.InvalidURL as exc:
            raise InvalidInputError(f"base_url {base_url!r} is not a valid URL: {exc}") from None
        if parsed.query or parsed.fragment:  # the endpoints' paths would be appended to them
            raise InvalidInputError(
                f"base_url {base_url!r} has a query or fragment; give the server's root (with a "
                "proxy's path prefix, if any) and nothing after it"
            )
        _check_timeout(timeout)
        check_count(max_inputs_per_request, "max_inputs_per_request")
        check_count(max_concurrency, "max_concurrency")
        self._made_from: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key,
            "model": model,
            "timeout": timeout,
            "max_inputs_per_request": max_inputs_per_request,
            "max_concurrency": max_concurrency,
            "task": task,
            "max_retries": max_retries,
            "verify": verify,
            "uds": uds,
        }
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.api_key = api_key if api_key is not None else os.environ.get("POOLRAG_API_KEY")
        self.model = model or None  # "" is no name, as the server reads it (and vLLM)
        self.timeout = timeout
        self.max_inputs_per_request = max_inputs_per_request
        self.max_concurrency = max_concurrency
        self.task = task
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidInputError(f"max_retries must be a count of 0 or more, got {max_retries!r}")
        self.max_retries = max_retries
        self._verify = _tls_verify(verify)
        self._uds = None if uds is None else os.fspath(uds)
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()  # threads that start at once share one connection pool
        self._async_clients = self._loop_clients()
        self._served: tuple[ModelFacts, ...] | None = None  # GET /v1/models, read once
        self._card_limits: dict[str, dict[str, int]] = {}  # each served name's limits its card says
        self._late_chunking_refusals: dict[str, str] = {}  # and why it cannot late-chunk, where it says
        self._queue_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]]
        self._queue_gates = weakref.WeakKeyDictionary()
        self._facts_lock = threading.Lock()
        _CLIENTS.add(self)

    def _loop_clients(self) -> LoopClients:
        return LoopClients(lambda: httpx.AsyncClient(**self._pool_kwargs(httpx.AsyncHTTPTransport)))

    def _leave_parents_connections(self) -> None:
        """In a forked child: open connections of its own. The inherited pools' sockets are the
        parent's too, so two processes writing requests on one connection read each other's answers
        (an error, or another request's vectors of the same shape); locks held by a parent's thread
        at the fork would never be released here."""
        _INHERITED.append((self._client, self._async_clients))
        self._client = None
        self._client_lock = threading.Lock()
        self._facts_lock = threading.Lock()
        self._async_clients = self._loop_clients()

    def __repr__(self) -> str:
        return f"PoolragClient(base_url={self.base_url!r}, model={self.model!r})"

    # -- transport ------------------------------------------------------------------------------
    def _pool_kwargs(self, transport: type[httpx.HTTPTransport | httpx.AsyncHTTPTransport]) -> dict[str, Any]:
        """The sync and the async connection pools' settings; a ``transport`` only for a socket: one
        given turns off ``$HTTP(S)_PROXY``."""
        return {
            "base_url": self.base_url,
            "headers": {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {},
            "timeout": self.timeout,
            "verify": self._verify,
            "transport": None if self._uds is None else transport(uds=self._uds),
        }

    def _sync(self) -> httpx.Client:
        client = self._client
        if client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = httpx.Client(**self._pool_kwargs(httpx.HTTPTransport))
                client = self._client
        return client

    def _body(self, fields: dict[str, Any], facts: ModelFacts | None) -> bytes:
        """The request's JSON (naming the model) as UTF-8, unescaped, whatever httpx's version would
        write (0.27 escapes every non-ASCII character, up to 3x the bytes :func:`_wire_size` counts)."""
        model = self.model if self.model is not None or facts is None else facts.model_name
        body = {"model": model, **fields} if model is not None else fields
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

    def _check(
        self, response: httpx.Response, facts: ModelFacts | None, inputs: int | None = None
    ) -> dict[str, Any]:
        """The answer's body, or the error it carries; ``facts`` are those the request was built on,
        ``inputs`` the number of inputs it carried where the client splits a call into requests."""
        path = response.request.url.path
        if response.is_success:
            if facts is not None:
                self._check_served_model(response, facts)
            try:
                return response.json()
            except ValueError:  # a proxy's page, or another service at this address
                kind = response.headers.get("content-type", "no content type")
                raise RemoteError(
                    f"{path} answered {response.status_code} with {kind}, not JSON: is {self.base_url} "
                    f"a poolrag server? It said: {response.text[: wire.PAGE_CHARS]!r}",
                    response.status_code,
                ) from None
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        code = wire.error_field(body, "code")
        message = wire.error_message(response.status_code, body, response.text[: 64 * wire.PAGE_CHARS])
        if response.status_code == 413 and inputs is not None and code != "answer_too_large":
            message += self._too_large_hint(inputs)  # a body over the limit: the answer's is said as it is
        if response.status_code in _CLIENT_ERRORS or code == "model_not_found":
            raise remote_input_error(f"{path}: {message}", response.status_code, body)
        url = response.request.url.copy_with(query=None)  # the server too: an app may call several
        raise RemoteError(f"{url} failed with HTTP {response.status_code}: {message}", response.status_code)

    def _unanswered(
        self, exc: httpx.HTTPError, attempts: int, since: float
    ) -> RemoteConnectionError | RemoteTimeoutError:
        """Why no answer came, in one line: a timeout is a busy or slow server, not an unreachable
        one; a connection lost mid-request is a server that stopped, not one never reached."""
        if isinstance(exc, httpx.TimeoutException):
            return RemoteTimeoutError(
                f"poolrag server at {self.base_url} did not answer within timeout={self.timeout} s "
                f"({type(exc).__name__}); it is busy or the request is large: raise timeout= or "
                "send less at once"
            )
        said = " ".join(str(exc).split())[: wire.PAGE_CHARS] or type(exc).__name__
        if _untrusted_certificate(exc):
            return RemoteConnectionError(
                f"the TLS certificate of {self.base_url} is not trusted here ({said}); pass verify= "
                "the CA bundle that signed it (a self-signed server's own certificate file), or set "
                "$SSL_CERT_FILE"
            )
        tried = f"{attempts} attempts over {time.monotonic() - since:.1f} s" if attempts > 1 else "1 attempt"
        if isinstance(exc, httpx.ConnectError):
            return RemoteConnectionError(
                f"cannot reach poolrag server at {self.base_url} ({tried}): {said}; is it running? "
                "A larger max_retries= waits longer for one restarting"
            )
        return RemoteConnectionError(
            f"poolrag server at {self.base_url} closed the connection before its answer ended ({tried}): "
            f"{said}; it stopped or restarted, or a proxy in front of it cut the request. A larger "
            "max_retries= waits longer for one restarting"
        )

    def _too_large_hint(self, inputs: int) -> str:
        if inputs == 1:  # lowering the client's limits cannot help
            return (
                " (one input alone is over the server's request limit: make it smaller, or start the "
                "server with a larger --max-body-bytes, --max-request-chars or --max-request-tokens, "
                "the one named)"
            )
        return (
            f" (this client sends at most {self.max_inputs_per_request} inputs and "
            f"{MAX_REQUEST_BYTES} bytes of text a request; lower max_inputs_per_request)"
        )

    def _post(
        self, path: str, fields: dict[str, Any], facts: ModelFacts | None, inputs: int | None = None
    ) -> dict[str, Any]:
        body = self._body(fields, facts)
        sent = self._sent(lambda: self._sync().post(path, content=body, headers=_JSON))
        return self._check(sent, facts, inputs)

    async def _apost(
        self, path: str, fields: dict[str, Any], facts: ModelFacts | None, inputs: int | None = None
    ) -> dict[str, Any]:
        body = self._body(fields, facts)
        client = await self._async_clients.get()
        sent = await self._asent(lambda: client.post(path, content=body, headers=_JSON))
        return self._check(sent, facts, inputs)

    def _get(self, path: str) -> dict[str, Any]:
        return self._check(self._sent(lambda: self._sync().get(path)), None)

    async def _aget(self, path: str) -> dict[str, Any]:
        client = await self._async_clients.get()
        return self._check(await self._asent(lambda: client.get(path)), None)

    def _sent(self, send: Callable[[], httpx.Response]) -> httpx.Response:
        """``send()``'s answer, sent again after the server's ``Retry-After`` while it is busy."""
        since = time.monotonic()
        for attempt in itertools.count():
            try:
                response = send()
            except httpx.HTTPError as exc:
                time.sleep(self._reconnect_wait(exc, attempt, since))
                continue
            if (wait := self._retry_wait(response, attempt)) is None:
                return response
            time.sleep(wait)
        raise AssertionError("unreachable")

    async def _asent(self, send: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
        since = time.monotonic()
        for attempt in itertools.count():
            try:
                response = await send()
            except httpx.HTTPError as exc:
                await asyncio.sleep(self._reconnect_wait(exc, attempt, since))
                continue
            if (wait := self._retry_wait(response, attempt)) is None:
                return response
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    def _reconnect_wait(self, exc: httpx.HTTPError, attempt: int, since: float) -> float:
        """Seconds to wait before sending again (:func:`_backoff`, ``max_retries`` times); giving up,
        it raises :meth:`_unanswered`'s error for the attempts made since ``since``. Sent again: a
        refused connection (a server restarting) and one lost before the answer ended (a server
        killed mid-request, a keep-alive connection the server closed as it was reused): every call
        is idempotent, so the answer is the same. Not a timeout: the request may still be running,
        and sending it again adds to a busy server's load; nor a certificate this machine does not
        trust, which no wait changes."""
        resendable = isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError))
        if not resendable or _untrusted_certificate(exc) or attempt >= self.max_retries:
            raise self._unanswered(exc, attempt + 1, since) from exc
        wait = _backoff(attempt)
        logger.info("no answer from %s (%s); sending again in %.1f s", self.base_url, exc, wait)
        return wait

    def _retry_wait(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before sending again, or ``None`` to take this answer: a 429 or 503 (the
        server at capacity or stopping: the request was not run) or a proxy's 502 / 504 is sent
        again ``max_retries`` times, after its ``Retry-After`` (else 0.5 s, doubling), as OpenAI's
        client does."""
        if response.status_code not in _RETRIED or attempt >= self.max_retries:
            return None
        wait = _retry_after_s(response.headers.get("Retry-After"))
        if not math.isfinite(wait):  # absent, unreadable, or "nan" / "inf"
            wait = _backoff(attempt)
        wait = min(max(wait, 0.0), MAX_RETRY_WAIT_S)
        logger.info("%s answered %d; sending again in %.1f s", self.base_url, response.status_code, wait)
        return wait

    # -- the model's facts ------------------------------------------------------------------------------
    @property
    def facts(self) -> ModelFacts:
        """The served model's facts, fetched from ``GET /v1/models`` on first use and kept until an
        answer names other weights (then read again on the next call).

        Blocks on the first call; async code gets them through the async methods, which fetch
        them without blocking the event loop.
        """
        return self._facts_for(self.task)

    def _facts_for(self, task: str | None) -> ModelFacts:
        served = self._served
        if served is None:
            listing = self._get("/v1/models")
            listed = self._served_from(listing)
            card = self._get(self._card_path()) if self._unlisted(listed) else None
            served = self._keep(listing, listed, card)
        return self._pick(served, task)

    async def _afacts(self, task: str | None) -> ModelFacts:
        served = self._served
        if served is None:
            listing = await self._aget("/v1/models")
            listed = self._served_from(listing)
            card = await self._aget(self._card_path()) if self._unlisted(listed) else None
            served = self._keep(listing, listed, card)
        return self._pick(served, task)

    def _unlisted(self, served: tuple[ModelFacts, ...]) -> bool:
        """``model`` is a name the server accepts without listing it (the folder ``poolrag serve``
        was given, a hub id's short name), or none it serves: its ``/v1/models/{model}`` says which,
        by the server's own lookup (its 404 names the served models)."""
        return self.model is not None and all(facts.model_name != self.model for facts in served)

    def _card_path(self) -> str:
        return f"/v1/models/{urllib.parse.quote(str(self.model), safe='/')}"

    def _keep(
        self, listing: dict[str, Any], listed: tuple[ModelFacts, ...], card: dict[str, Any] | None
    ) -> tuple[ModelFacts, ...]:
        """The models ``listing`` lists (as ``listed``), with the unlisted ``model``'s ``card`` where
        it was read, and the limits their cards say. The first listing fetched wins, so threads and
        tasks racing on the first call agree."""
        cards: list[Any] = listing["data"]  # a list of cards: _served_from read models from it
        if card is not None:
            listed += (ModelFacts.from_json(str(self.model), card),)
            cards = [*cards, {**card, "id": self.model}]
        limits, refusals = _card_limits_and_refusals(cards)
        with self._facts_lock:
            if self._served is None:
                self._served, self._card_limits, self._late_chunking_refusals = listed, limits, refusals
            return self._served

    @property
    def late_chunking_refusal(self) -> str | None:
        """Why :meth:`embed_chunks` cannot run on the served model, as its model card says (the
        engine's :attr:`~poolrag.Engine.late_chunking_refusal`); ``None`` where it can, or where a
        server older than that field says nothing (its refusal then comes with the first call).
        Read with the facts, before any input: an ingest refuses before it makes a collection."""
        facts = self._facts_for("embed")  # the model embed_chunks runs on
        return self._late_chunking_refusals.get(facts.model_name)

    def _check_served_model(self, response: httpx.Response, facts: ModelFacts) -> None:
        """Refuse an answer from other weights than ``facts`` describe, and forget the listing.

        Compared with the facts the request was built on, not the ones kept now: a concurrent call
        may already have dropped them, and its caller still holds keys made from the old ones.
        """
        served = wire.served_identity(response.headers)
        if served is None or served == (facts.model_identity, facts.output_fingerprint):
            return
        self._forget(facts)
        identity, fingerprint = served
        raise ServedModelChangedError(
            f"the server at {self.base_url} now serves other weights or pooling ({identity}, outputs "
            f"{fingerprint}) than this client read ({facts.model_identity}, outputs "
            f"{facts.output_fingerprint}); the answer was refused so nothing is filed under the old "
            "model's facts. The next call reads the new facts; caches and collections filled by the "
            "old model do not hold this model's vectors"
        )

    def _forget(self, facts: ModelFacts) -> None:
        """Drop the listing ``facts`` came from (not a newer one a concurrent call read)."""
        with self._facts_lock:
            if self._served is not None and any(kept is facts for kept in self._served):
                self._served = None

    def _vectors(self, vectors: list[np.ndarray], width: int | None, facts: ModelFacts) -> np.ndarray:
        """The vectors as one array, of the width the facts (and the call's ``dimensions``) say.

        Vectors of another width come from another model: the server changed it, and a proxy in
        front of it dropped the headers that would have said so. They are refused, as an answer
        naming other weights is, before a cache or a collection files them under these facts."""
        wrong = next((v.shape[-1] for v in vectors if width is not None and v.shape[-1] != width), None)
        if wrong is not None:
            self._forget(facts)
            raise ServedModelChangedError(
                f"the server at {self.base_url} answered {wrong}-dimensional vectors, but "
                f"{facts.model_name}'s facts (read earlier) say {width}: it now serves another model "
                "(a proxy dropped the headers naming it). The answer was refused; the next call "
                "reads the new facts, and caches and collections filled by the old model do not "
                "hold this model's vectors"
            )
        return np.stack(vectors) if vectors else np.zeros((0, width or 0), dtype=np.float32)

    def _known_facts(self, task: str) -> ModelFacts | None:
        """The facts for ``task`` when the listing was read (a call that needs none sends without)."""
        return None if self._served is None else self._pick(self._served, task)

    def _served_from(self, listing: dict[str, Any]) -> tuple[ModelFacts, ...]:
        cards = [card for card in listing.get("data", []) if isinstance(card, dict)]
        if not cards:
            raise RemoteError(f"{self.base_url}/v1/models lists no model")
        try:
            return tuple(ModelFacts.from_json(str(card.get("id")), card) for card in cards)
        except InvalidInputError as exc:  # vLLM's, TEI's or OpenAI's listing: no weights, no tasks
            raise RemoteError(
                f"{self.base_url} does not describe its models as 'poolrag serve' does ({exc}); "
                "PoolragClient talks to poolrag servers, for another server use its own client "
                "(e.g. the openai package)"
            ) from None

    def _pick(self, served: tuple[ModelFacts, ...], task: str | None) -> ModelFacts:
        """The facts of the model named ``model``, or of the one answering ``task`` unnamed: one
        listing answers every task, so a cache keyed by :attr:`facts` and a call's own facts agree."""
        if self.model is None:
            return served[answering_model(served, task)]
        for facts in served:
            if facts.model_name == self.model:
                return facts
        names = ", ".join(repr(facts.model_name) for facts in served)
        raise InvalidInputError(f"model {self.model!r} is not served here; use {names}")

    def _checked_params(self, params: PoolingParams | None, task: str, facts: ModelFacts) -> ResolvedParams:
        """``params`` checked for ``task`` on ``facts`` by the engine's rule; a task the model does
        not run is refused naming it by its served name (and, of several, those that run it)."""
        try:
            return (params or PoolingParams()).verify(task, facts)
        except UnsupportedTaskError as exc:
            raise naming_served(exc, facts, self._served or (facts,)) from None

    def _inputs_per_request(self, task: str) -> int:
        """``max_inputs_per_request``, or the served model's own limit (``poolrag serve
        --max-inputs``, on its card) where lower: the server refuses a longer request with a 400.
        An older server's card says none."""
        facts = self._known_facts(task)
        limit = None if facts is None else self._card_limits.get(facts.model_name, {}).get(_MAX_INPUTS)
        return self.max_inputs_per_request if limit is None else min(limit, self.max_inputs_per_request)

    def _admitted(self, facts: ModelFacts) -> asyncio.Semaphore | contextlib.nullcontext[None]:
        """The running loop's gate of ``--max-queue`` requests for ``facts``' model (a semaphore
        belongs to one loop), or none where the card says no limit."""
        queue = self._card_limits.get(facts.model_name, {}).get(_MAX_QUEUE)
        if queue is None:
            return contextlib.nullcontext()
        gates = self._queue_gates.setdefault(asyncio.get_running_loop(), {})
        return gates.setdefault(facts.model_name, asyncio.Semaphore(queue))

    def _chunks(self, items: Sequence[Any], task: str, beside: Sequence[Any] = ()) -> list[slice]:
        """Consecutive runs of ``items`` (each with its ``beside`` item, N:N pairs' other text) of
        at most :meth:`_inputs_per_request` for ``task`` and (unless one item is larger alone)
        ``MAX_REQUEST_BYTES``: a server refuses a larger body with a 413. A run is all texts or all
        token ids: the server reads an ``input`` list as one or the other (as OpenAI and vLLM do),
        while the engine takes a list that mixes them."""
        runs: list[slice] = []
        start, size = 0, 0
        most = self._inputs_per_request(task)
        for i, item in enumerate(items):
            item_size = _wire_size(item) + (_wire_size(beside[i]) if beside else 0)
            if i > start and (
                i - start >= most
                or size + item_size > MAX_REQUEST_BYTES
                or _token_ids(item) != _token_ids(items[start])
                or (bool(beside) and _token_ids(beside[i]) != _token_ids(beside[start]))
            ):
                runs.append(slice(start, i))
                start, size = i, 0
            size += item_size
        if start < len(items):
            runs.append(slice(start, len(items)))
        return runs

    async def _gather(self, calls: list[Callable[[], Any]], facts: ModelFacts) -> list[Any]:
        """Each call's result, ``max_concurrency`` at a time, and this client's requests to ``facts``'
        model at most the server's ``--max-queue`` at a time (on its card) across the calls of a
        loop: more would be refused with 503 by a server nobody else uses. The first failure (or
        the caller's cancellation) cancels the rest: left running, they would go on sending every
        remaining request of a call that already raised, each retrying against a server that is down."""
        limit, admitted = asyncio.Semaphore(self.max_concurrency), self._admitted(facts)

        async def run(call: Callable[[], Any]) -> Any:
            async with limit, admitted:
                return await call()

        tasks = [asyncio.ensure_future(run(call)) for call in calls]
        try:
            return await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def _checked(
        self,
        path: str,
        task: str,
        params: PoolingParams | None,
        requests: Callable[[], Requests],
        decode: Callable[[dict[str, Any], int], list[Item]],
    ) -> list[Item]:
        """``params`` checked for ``task`` by the engine's rule, then ``requests()`` sent and decoded."""
        facts = self._facts_for(task)
        self._checked_params(params, task, facts)
        return self._post_each(path, requests(), facts, decode)

    async def _achecked(
        self,
        path: str,
        task: str,
        params: PoolingParams | None,
        requests: Callable[[], Requests],
        decode: Callable[[dict[str, Any], int], list[Item]],
    ) -> list[Item]:
        facts = await self._afacts(task)
        self._checked_params(params, task, facts)
        return await self._apost_each(path, requests(), facts, decode)

    def _post_each(
        self,
        path: str,
        requests: Requests,
        facts: ModelFacts,
        decode: Callable[[dict[str, Any], int], list[Item]],
    ) -> list[Item]:
        """Each request in turn (in halves where it or its answer is over the server's limit); the
        decoded results in input order."""
        out: list[Item] = []
        pending = list(reversed(requests))
        while pending:
            body, n = pending.pop()
            start = len(out)
            try:
                out += decode(self._post(path, body, facts, n), n)
            except _HALVED as exc:
                if (halves := _halves(body, n)) is None:
                    raise _alone(exc, start) from None
                pending += reversed(halves)
            except InvalidInputError as exc:  # named in the request, not in the caller's list
                raise at_position(exc, range(start, start + n)) from None
        return out

    async def _apost_each(
        self,
        path: str,
        requests: Requests,
        facts: ModelFacts,
        decode: Callable[[dict[str, Any], int], list[Item]],
    ) -> list[Item]:
        """The requests ``max_concurrency`` at a time; the decoded results in input order."""

        def call(body: dict[str, Any], places: range) -> Callable[[], Awaitable[list[Item]]]:
            async def send() -> list[Item]:
                try:
                    return decode(await self._apost(path, body, facts, len(places)), len(places))
                except _HALVED as exc:
                    if (halves := _halves(body, len(places))) is None:
                        raise _alone(exc, places[0]) from None
                    (first, n), (second, _) = halves
                    head = await call(first, places[:n])()
                    return head + await call(second, places[n:])()
                except InvalidInputError as exc:  # named in the request, not in the caller's list
                    raise at_position(exc, places) from None

            return send

        starts = itertools.accumulate((n for _, n in requests), initial=0)
        places = [range(start, start + n) for (_, n), start in zip(requests, starts, strict=False)]
        parts = await self._gather(
            [call(body, where) for (body, _), where in zip(requests, places, strict=True)], facts
        )
        return [item for part in parts for item in part]

    # -- request bodies ---------------------------------------------------------------------------
    def _wired(self, items: Sequence[Any], field: str, one: bool = False) -> list[Any]:
        """Each item as the server reads it: a text, token ids, or an image (path, bytes, PIL) as
        a data URL, named ``field[i]`` when refused (``field`` for ``one`` input), as the engine
        names it."""
        # the facts are fetched before requests are made; with none yet, the server is the judge
        reads_images = self._served is None or self._pick(self._served, self.task).reads_images
        wired = []
        for i, item in enumerate(items):
            index = None if one else i
            name = field if index is None else f"{field}[{index}]"
            text = check_text(item, field, index) if isinstance(item, str) else item
            wired.append(wire.wire_input(text, reads_images, name))
        return wired

    def _param_fields(self, params: PoolingParams | None, endpoint: str) -> dict[str, Any]:
        """:func:`wire.param_fields` with the served model's length, once its facts were fetched."""
        length = None if self._served is None else self._pick(self._served, self.task).max_model_len
        return wire.param_fields(params, endpoint, length)

    def _input_requests(self, prompts: Any, task: str, extra: dict[str, Any]) -> Requests:
        items = self._wired(prompt_list(prompts), "input", one=isinstance(prompts, str))
        return [({"input": items[s], **extra}, len(items[s])) for s in self._chunks(items, task)]

    def _embed_requests(self, prompts: Any, params: PoolingParams | None) -> Requests:
        extra = {"encoding_format": "base64", **self._param_fields(params, "/v1/embeddings")}
        return self._input_requests(prompts, "embed", extra)

    def _pooling_requests(self, prompts: Any, task: str, params: PoolingParams | None) -> Requests:
        extra = {"task": task, **self._param_fields(params, "/pooling")}
        return self._input_requests(prompts, task, extra)

    def _classify_requests(self, prompts: Any, params: PoolingParams | None) -> Requests:
        return self._input_requests(prompts, "classify", self._param_fields(params, "/classify"))

    def _pair_requests(
        self, text_1: str | Sequence[str], text_2: str | Sequence[str], params: PoolingParams | None
    ) -> Requests:
        """``/score`` bodies for 1:1, 1:N or N:N pairs, checked as the engine checks them."""
        firsts, seconds = score_pairs(text_1, text_2)
        if not seconds:
            return []
        firsts, seconds = self._wired(firsts, "text_1"), self._wired(seconds, "text_2")
        extra = self._param_fields(params, "/score")
        return [
            (
                {"text_1": firsts[0] if len(firsts) == 1 else firsts[s], "text_2": seconds[s], **extra},
                len(seconds[s]),
            )
            for s in self._chunks(seconds, "score", firsts if len(firsts) > 1 else ())
        ]

    def _score_requests(self, text_1: str, text_2: Sequence[str], params: PoolingParams | None) -> Requests:
        if not isinstance(text_1, str):
            raise InputTypeError(
                f"text_1 must be one string, the query, not {type(text_1).__name__}; score_array scores "
                "each text_2 item against it (for pairs, call it once per query)"
            )
        seconds = self._wired(item_list(text_2, "text_2"), "text_2")
        if not seconds:
            raise InvalidInputError(  # as the engine says
                "text_2 is empty: text_1 and text_2 must both be non-empty", param="text_2"
            )
        extra = self._param_fields(params, "/score")
        return [
            ({"text_1": check_text(text_1, "text_1"), "text_2": seconds[s], **extra}, len(seconds[s]))
            for s in self._chunks(seconds, "score")
        ]

    def _rerank_fields(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None,
        first_stage_scores: Sequence[float] | None,
        second_stage: str | None,
        rerank_weight: float | None,
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "documents": self._wired(documents, "documents"),  # a list: the caller's item_list made it
            "query": check_text(query, "query"),
            "return_documents": False,
        }
        first = None if first_stage_scores is None else [float(s) for s in first_stage_scores]
        if first is not None and not all(map(math.isfinite, first)):  # JSON has no NaN: said as in process
            raise InvalidInputError(
                "first-stage scores contain NaN or infinite values; they cannot be ranked"
            )
        if isinstance(rerank_weight, float) and not math.isfinite(rerank_weight):
            raise InvalidInputError(f"the reranker weight must be a number in [0, 1], got {rerank_weight!r}")
        optional = {
            "top_n": top_n,
            "first_stage_scores": first,
            "second_stage": None if second_stage is None else str(second_stage),
            "rerank_weight": rerank_weight,
        }
        return fields | {name: value for name, value in optional.items() if value is not None}

    # -- embeddings ------------------------------------------------------------------------------------
    def embed_array(self, prompts: Prompts, pooling_params: PoolingParams | None = None) -> np.ndarray:
        """All embeddings as one ``[N, D]`` float32 array, like ``Engine.embed_array``."""
        facts = self._facts_for("embed")
        width = self._checked_params(pooling_params, "embed", facts).dimensions or facts.embedding_dim
        requests = self._embed_requests(prompts, pooling_params)
        vectors = self._post_each("/v1/embeddings", requests, facts, wire.decode_embeddings)
        return self._vectors(vectors, width, facts)

    async def aembed_array(self, prompts: Prompts, pooling_params: PoolingParams | None = None) -> np.ndarray:
        """:meth:`embed_array` for asyncio."""
        facts = await self._afacts("embed")
        width = self._checked_params(pooling_params, "embed", facts).dimensions or facts.embedding_dim
        requests = self._embed_requests(prompts, pooling_params)
        vectors = await self._apost_each("/v1/embeddings", requests, facts, wire.decode_embeddings)
        return self._vectors(vectors, width, facts)

    def _late_chunk_request(
        self, document: str, spans: Sequence[tuple[int, int]], params: PoolingParams | None
    ) -> dict[str, Any]:
        return {
            "input": document,
            "late_chunking": {"spans": [[int(start), int(end)] for start, end in spans]},
            "encoding_format": "base64",
            **self._param_fields(params, "/v1/embeddings"),
        }

    def embed_chunks(
        self, document: str, spans: Sequence[tuple[int, int]], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """Late chunking on the server, like ``Engine.embed_chunks``: ``[len(spans), D]`` vectors, one
        per character span, from one pass over the whole ``document`` (spans are checked there)."""
        facts = self._facts_for("embed")
        width = self._checked_params(pooling_params, "embed", facts).dimensions or facts.embedding_dim
        fields = self._late_chunk_request(document, spans, pooling_params)
        body = self._post("/v1/embeddings", fields, facts, inputs=1)
        return self._vectors(wire.decode_embeddings(body, len(spans)), width, facts)

    async def aembed_chunks(
        self, document: str, spans: Sequence[tuple[int, int]], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """:meth:`embed_chunks` for asyncio."""
        facts = await self._afacts("embed")
        width = self._checked_params(pooling_params, "embed", facts).dimensions or facts.embedding_dim
        fields = self._late_chunk_request(document, spans, pooling_params)
        body = await self._apost("/v1/embeddings", fields, facts, inputs=1)
        return self._vectors(wire.decode_embeddings(body, len(spans)), width, facts)

    # -- scores ----------------------------------------------------------------------------------------
    def score_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """One float64 score of each ``text_2`` item against the query ``text_1``, like
        ``Engine.score_array``."""
        requests = functools.partial(self._score_requests, text_1, text_2, pooling_params)
        scores = self._checked("/score", "score", pooling_params, requests, wire.decode_scores)
        return np.asarray(scores, dtype=np.float64)

    async def ascore_array(
        self, text_1: str, text_2: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> np.ndarray:
        """:meth:`score_array` for asyncio."""
        requests = functools.partial(self._score_requests, text_1, text_2, pooling_params)
        scores = await self._achecked("/score", "score", pooling_params, requests, wire.decode_scores)
        return np.asarray(scores, dtype=np.float64)

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        *,
        first_stage_scores: Sequence[float] | None = None,
        second_stage: str | None = None,
        rerank_weight: float | None = None,
    ) -> list[RerankedDocument]:
        """The documents best first from the server's ``/rerank``, as
        :meth:`CrossEncoderReranker.rerank <poolrag.retrieval.CrossEncoderReranker.rerank>` ranks them.

        With ``first_stage_scores`` (the retriever's score of each document) the reranker's scores
        are fused with them (``second_stage`` ``"fuse"`` by default, or ``"rrf"``; ``rerank_weight``
        is the reranker's share); without, they replace them, as Jina and Cohere rerankers do.
        """
        documents = item_list(documents, "documents")  # "" or None is refused as in process, not empty
        if not documents:
            return []
        fields = self._rerank_fields(query, documents, top_n, first_stage_scores, second_stage, rerank_weight)
        return wire.decode_rerank(self._post("/rerank", fields, self._known_facts("score")))

    async def arerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        *,
        first_stage_scores: Sequence[float] | None = None,
        second_stage: str | None = None,
        rerank_weight: float | None = None,
    ) -> list[RerankedDocument]:
        """:meth:`rerank` for asyncio."""
        documents = item_list(documents, "documents")  # "" or None is refused as in process, not empty
        if not documents:
            return []
        fields = self._rerank_fields(query, documents, top_n, first_stage_scores, second_stage, rerank_weight)
        return wire.decode_rerank(await self._apost("/rerank", fields, self._known_facts("score")))

    # -- raw pooled data (ColBERT token vectors, rewards) ------------------------------------------------
    def encode_arrays(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[np.ndarray]:
        """Each input's pooled data (e.g. a ``[T, D]`` matrix for ``token_embed``), like ``Engine.encode``."""
        requests = functools.partial(self._pooling_requests, prompts, pooling_task, pooling_params)
        return self._checked(
            "/pooling", pooling_task, pooling_params, requests, _pooling_decoder(pooling_task)
        )

    async def aencode_arrays(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[np.ndarray]:
        """:meth:`encode_arrays` for asyncio."""
        requests = functools.partial(self._pooling_requests, prompts, pooling_task, pooling_params)
        decode = _pooling_decoder(pooling_task)
        return await self._achecked("/pooling", pooling_task, pooling_params, requests, decode)

    def sparse_embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[SparseVector]:
        """Token id → weight vectors, like ``Engine.sparse_embed`` (SPLADE / BGE-M3 servers)."""
        return [_sparse_vector(a) for a in self.encode_arrays(prompts, "sparse_embed", pooling_params)]

    async def asparse_embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[SparseVector]:
        """:meth:`sparse_embed` for asyncio."""
        return [_sparse_vector(a) for a in await self.aencode_arrays(prompts, "sparse_embed", pooling_params)]

    # -- the engine's task methods, with its result types -------------------------------------------------
    def embed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]:
        """Like ``Engine.embed``: one :class:`EmbeddingOutput` per prompt."""
        return _outputs(prompts, list(self.embed_array(prompts, pooling_params)), EmbeddingOutput)

    async def aembed(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[EmbeddingOutput]]:
        """:meth:`embed` for asyncio."""
        return _outputs(prompts, list(await self.aembed_array(prompts, pooling_params)), EmbeddingOutput)

    def classify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """Like ``Engine.classify``: each prompt's class probabilities, from ``/classify``."""
        requests = functools.partial(self._classify_requests, prompts, pooling_params)
        probs = self._checked("/classify", "classify", pooling_params, requests, wire.decode_probs)
        return _outputs(prompts, probs, ClassificationOutput)

    async def aclassify(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[ClassificationOutput]]:
        """:meth:`classify` for asyncio."""
        requests = functools.partial(self._classify_requests, prompts, pooling_params)
        probs = await self._achecked("/classify", "classify", pooling_params, requests, wire.decode_probs)
        return _outputs(prompts, probs, ClassificationOutput)

    def score(
        self,
        text_1: ScoreSide,
        text_2: ScoreSide,
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        """Like ``Engine.score``: 1:1, 1:N (one query) or N:N (zipped pairs)."""
        requests = functools.partial(self._pair_requests, text_1, text_2, pooling_params)
        return _scores(self._checked("/score", "score", pooling_params, requests, wire.decode_scores))

    async def ascore(
        self,
        text_1: ScoreSide,
        text_2: ScoreSide,
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[ScoringOutput]]:
        """:meth:`score` for asyncio."""
        requests = functools.partial(self._pair_requests, text_1, text_2, pooling_params)
        return _scores(await self._achecked("/score", "score", pooling_params, requests, wire.decode_scores))

    def encode(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Like ``Engine.encode``: any task's raw pooled data, from ``/pooling``."""
        return _outputs(prompts, self.encode_arrays(prompts, pooling_task, pooling_params), PoolingOutput)

    async def aencode(
        self,
        prompts: Prompts,
        pooling_task: PoolingTask = "embed",
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """:meth:`encode` for asyncio."""
        arrays = await self.aencode_arrays(prompts, pooling_task, pooling_params)
        return _outputs(prompts, arrays, PoolingOutput)

    def reward(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """Like ``Engine.reward``: a sequence score, or per-step scores of a process reward model."""
        return self.encode(prompts, "reward", pooling_params)

    async def areward(
        self, prompts: Prompts, pooling_params: PoolingParams | None = None
    ) -> list[PoolingRequestOutput[PoolingOutput]]:
        """:meth:`reward` for asyncio."""
        return await self.aencode(prompts, "reward", pooling_params)

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids the served model reads for ``text``, from ``/tokenize``."""
        fields = {"prompt": check_text(text), "add_special_tokens": add_special_tokens}
        return [int(t) for t in self._post("/tokenize", fields, self.facts, inputs=1)["tokens"]]

    async def atokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """:meth:`tokenize` for asyncio."""
        fields = {"prompt": check_text(text), "add_special_tokens": add_special_tokens}
        facts = await self._afacts(self.task)
        return [int(t) for t in (await self._apost("/tokenize", fields, facts, inputs=1))["tokens"]]

    # -- lifecycle ---------------------------------------------------------------------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        """A client pickles as its settings (its connections and locks stay behind): a worker
        process opens its own, and reads the server's facts afresh."""
        return functools.partial(type(self), **self._made_from), ()

    def close(self) -> None:
        """Close the connections: the sync client's, and the async ones of every loop still open."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self._async_clients.close()

    async def aclose(self) -> None:
        """:meth:`close` from async code: this loop's connections are closed without blocking it."""
        await self._async_clients.aclose_current()
        self.close()

    def __enter__(self) -> PoolragClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> PoolragClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _pooling_decoder(task: str) -> Callable[[dict[str, Any], int], list[np.ndarray]]:
    return functools.partial(wire.decode_pooling, sparse=task == "sparse_embed")


def _outputs(
    prompts: Any, results: Sequence[np.ndarray], wrap: Callable[[np.ndarray], Out]
) -> list[PoolingRequestOutput[Out]]:
    """Results shaped as the engine's: its request ids, the prompt text, the ids of a token prompt."""
    items = prompt_list(prompts)
    return [
        PoolingRequestOutput(
            str(i),
            wrap(result),
            [int(t) for t in item["prompt_token_ids"]] if isinstance(item, Mapping) else [],
            item if isinstance(item, str) else None,  # an image has no text to echo
        )
        for i, (item, result) in enumerate(zip(items, results, strict=True))
    ]


def _scores(scores: Sequence[float]) -> list[PoolingRequestOutput[ScoringOutput]]:
    return [PoolingRequestOutput(str(i), ScoringOutput(score)) for i, score in enumerate(scores)]


def _card_limits_and_refusals(cards: list[Any]) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Each model card's limits (``max_inputs_per_request``, ``max_queue``) and its
    ``late_chunking_refusal``, by its ``id``; a server older than those fields says none, and the
    client's own limits stand."""
    limits: dict[str, dict[str, int]] = {}
    refusals: dict[str, str] = {}
    for card in cards:
        if not isinstance(card, dict):  # _served_from skipped it too
            continue
        for key in (_MAX_INPUTS, _MAX_QUEUE):
            limit = card.get(key)
            if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
                limits.setdefault(str(card.get("id")), {})[key] = limit
        refusal = card.get("late_chunking_refusal")
        if isinstance(refusal, str) and refusal:
            refusals[str(card.get("id"))] = refusal
    return limits, refusals


def _wire_size(item: str | list[int]) -> int:
    """About the bytes a wired input (:func:`wire.wire_input`) takes in a JSON body
    (:meth:`PoolragClient._body`): a text's UTF-8, a token id list's digits and commas."""
    if isinstance(item, str):  # an ASCII text's bytes are its length: no copy made to count them
        return (len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))) + 3
    return 8 * len(item) + 2


def _halves(
    body: dict[str, Any], n: int
) -> tuple[tuple[dict[str, Any], int], tuple[dict[str, Any], int]] | None:
    """``body`` as two requests of the first and the last half of its ``input`` list (or its
    ``text_2`` list, with an N:N ``text_1`` beside it), or ``None`` for a request of one input
    (nothing to split)."""
    if n < 2:
        return None
    key = "input" if "input" in body else "text_2"  # each request _post_each sends: a list of n
    items, half = body[key], n // 2
    first, second = {**body, key: items[:half]}, {**body, key: items[half:]}
    if key == "text_2" and isinstance(body.get("text_1"), list):
        first["text_1"], second["text_1"] = body["text_1"][:half], body["text_1"][half:]
    return (first, half), (second, n - half)


def _token_ids(item: Any) -> bool:
    """Whether a wired input is a token prompt's ids (else a text, or an image's data URL)."""
    return isinstance(item, list)


def _alone(
    refused: RemoteAnswerTooLargeError | RemoteRequestTooLargeError, position: int
) -> RemoteAnswerTooLargeError | RemoteRequestTooLargeError:
    """The refusal of the one input at ``position`` of the caller's list which alone (or whose
    answer alone) is over the server's limit (halving cannot help), named."""
    return type(refused)(f"input[{position}]: {refused}", 413, refused.param)
