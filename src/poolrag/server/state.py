"""What every route needs: the engine, the limits, the admission budgets and the metrics of one app."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from fastapi import Request

from poolrag.model_facts import ModelFacts
from poolrag.server.admission import Admission
from poolrag.server.engine_calls import EngineCalls
from poolrag.server.inputs import check_model
from poolrag.server.metrics import ServerMetrics
from poolrag.server.settings import Limits, ServerSettings

if TYPE_CHECKING:
    from poolrag.backend import InProcessEngine

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(slots=True)
class ServerState:
    engine: InProcessEngine
    settings: ServerSettings
    limits: Limits
    calls: EngineCalls
    admission: Admission
    metrics: ServerMetrics
    started: int

    @property
    def served_facts(self) -> ModelFacts:
        """The engine's facts under the served name: the folder's path is the host's business."""
        return self.engine.facts.renamed(self.settings.model_name)

    def check_model(self, model: str | None) -> None:
        check_model(self.settings, model)

    async def run_engine(
        self,
        path: str,
        num_inputs: int,
        call: Callable[P, Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Admit the request (or 503), run one of :class:`EngineCalls`' tasks, record batch size,
        engine time and, for per-input outputs, the tokens the model read."""
        async with self.admission.slot():
            started = time.perf_counter()
            result = await call(*args, **kwargs)
            self.metrics.engine_latency.labels(path).observe(time.perf_counter() - started)
        self.metrics.batch_size.labels(path).observe(num_inputs)
        if isinstance(result, list):
            tokens = sum(getattr(item, "num_tokens", 0) for item in result)
            self.metrics.prompt_tokens.labels(path).inc(tokens)
        return result

    async def run_blocking(self, path: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Admit the request (or 503) and run a blocking helper off the loop."""
        async with self.admission.slot():
            started = time.perf_counter()
            result = await self.calls.offload(fn, *args, **kwargs)
            self.metrics.engine_latency.labels(path).observe(time.perf_counter() - started)
        return result


def server_state(request: Request) -> ServerState:
    return request.app.state.poolrag


def new_id(prefix: str, request_id: str | None = None) -> str:
    """The answer's id: the client's ``request_id`` when it sent one (vLLM's field), else a fresh one."""
    return request_id if request_id is not None else f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
