"""Answer a request uvicorn cancels at the end of its shutdown window as the closed engines do.

``DrainingServer`` closes the engines when the drain window ends, so a request waiting on one is
answered JSON 503 "shutting down". A request that has not reached an engine by uvicorn's own
deadline (a body still arriving, thousands of texts still tokenising on a loaded machine) is
cancelled by uvicorn instead, which answered a bare text/plain 500 and logged a traceback. Only
uvicorn's shutdown cancels a request's task (a client that leaves is a ``http.disconnect``
message), so a cancelled request that has not started its answer gets that same 503 here.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolrag.errors import EngineClosedError
from poolrag.server.errors import error_response, from_poolrag_error


class StopAnswerMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_watched)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if started or task is None:
                raise
            task.uncancel()  # answered, not cancelled: the connection gets its 503 before it closes
            error = from_poolrag_error(EngineClosedError("the server stopped before answering"))
            await error_response(error)(scope, receive, send)
