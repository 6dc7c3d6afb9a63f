"""The route class of every POST endpoint: off-loop parsing, a token budget, abort on disconnect.

FastAPI's own handler parses and validates the body, and serialises the answer, on the event
loop; for large requests that stalled every other connection. :class:`OffLoopRoute` keeps
FastAPI's signature (``async def endpoint(body: SomeRequest, request: Request)``, plus FastAPI's
``response: Response`` where the endpoint sets headers on its answer), so ``/openapi.json`` still
documents the body model, but its handler:

1. refuses a body declared as anything but JSON (415), and on a keyless server one declared as
   nothing: a ``text/plain`` or a bare ``Blob`` POST needs no CORS preflight, so without this any
   web page could make a browser spend a keyless local server's CPU;
2. parses and validates the body on a worker thread (:func:`poolrag.server.parsing.parse_body`),
   or on the loop while :func:`poolrag.loop_work.stays_on_loop` says so (the engine's rule): for a
   one-text request the two thread hops cost far more than the work they moved (a py-spy profile
   under 16 connections: 23% of the loop thread's time in handing work to a thread, under 1% in
   the parse and encoding themselves);
3. finds the model the body names (:func:`poolrag.server.state.model_state`), checks the body
   against that model's per-request limits and holds its tokens in that model's admission budget
   while the endpoint runs (the body is first parsed under the loosest limits of the models served);
4. serialises the answer on a worker thread (a :class:`~poolrag.server.float_json.JsonAnswer` by
   orjson, any other by pydantic), or on the loop for a JsonAnswer the same rule keeps there;
5. watches for the client's ``http.disconnect`` meanwhile: when the client leaves, the work is
   cancelled (the engine's async core drops queued sequences of a cancelled caller), its queue
   slot is freed, and the request is counted as 499.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.types import Receive

from poolrag.errors import UnsupportedTaskError
from poolrag.loop_work import stays_on_loop
from poolrag.server.errors import APIError
from poolrag.server.float_json import JsonAnswer
from poolrag.server.metrics import CLIENT_CLOSED
from poolrag.server.parsing import check_size, parse_body
from poolrag.server.state import model_state, served_models

logger = logging.getLogger(__name__)


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has gone (call only after the body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_disconnected(request: Request, work: Awaitable[Response]) -> Response:
    """``work``'s answer, or, when the client disconnects first, ``work`` cancelled and a 499."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watcher.cancel()
    if not task.cancelled() and task.done():
        return task.result()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    logger.info("client left before the answer to %s; its work was dropped", request.url.path)
    return Response(status_code=CLIENT_CLOSED)


def _dump(result: Any, exclude_none: bool) -> bytes:
    if isinstance(result, JsonAnswer):  # built as JSON's types already (vectors as numpy rows)
        return result.encode()
    return result.model_dump_json(exclude_none=exclude_none).encode()


def _check_json_media_type(content_type: str | None, keyless: bool) -> None:
    """A keyless server also refuses a body with no ``Content-Type``: a page's ``fetch`` of a bare
    ``Blob`` sends none and needs no preflight. With a key, such a request cannot carry it."""
    if not content_type and keyless:  # an empty header declares nothing either
        raise APIError(415, "the body must be declared as JSON: send Content-Type: application/json")
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise APIError(415, f"the body must be JSON (Content-Type: application/json), not {media or '?'}")


class OffLoopRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        endpoint = self.endpoint
        hints = typing.get_type_hints(endpoint)
        model: type[BaseModel] = hints["body"]
        sets_headers = "response" in hints
        exclude_none = self.response_model_exclude_none

        async def answer(request: Request, raw: bytes) -> Response:
            served = served_models(request)
            if stays_on_loop(body_bytes=len(raw)):
                parsed = parse_body(raw, model, served.parse_limits)
            else:
                parsed = await anyio.to_thread.run_sync(parse_body, raw, model, served.parse_limits)
            body = parsed.body
            state = model_state(request, getattr(body, "model", None), getattr(body, "default_task", None))
            check_size(parsed.token_ids, parsed.chars, state.limits)
            headers = Response()  # what the endpoint sets on its answer, as FastAPI's ``response``
            del headers.headers["content-length"]
            with state.admission.tokens(parsed.tokens_within(state.engine.text_token_cap)):
                args = (parsed.body, request, headers) if sets_headers else (parsed.body, request)
                try:
                    result = await endpoint(*args)
                except UnsupportedTaskError as exc:
                    raise served.task_refusal(state, exc) from None
            if isinstance(result, Response):  # an answer already encoded (e.g. vLLM's bytes format)
                answer = result
            elif isinstance(result, JsonAnswer) and stays_on_loop(answer_values=result.values):
                answer = Response(result.encode(), media_type="application/json")
            else:
                content = await anyio.to_thread.run_sync(_dump, result, exclude_none)
                answer = Response(content, media_type="application/json")
            answer.headers.update(headers.headers)
            return answer

        async def handle(request: Request) -> Response:
            keyless = served_models(request).settings.api_key is None
            _check_json_media_type(request.headers.get("content-type"), keyless)
            raw = await request.body()
            return await until_disconnected(request, answer(request, raw))

        return handle
