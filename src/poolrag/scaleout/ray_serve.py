"""``poolrag serve`` as a Ray Serve deployment: replicas of the same FastAPI app behind Ray's proxy.

Each replica builds its own :class:`~poolrag.Engine` per model and the app
:func:`poolrag.server.app.create_models_app` makes for one process (several models: one replica
holds them all, as ``poolrag serve A B`` does), so the HTTP API, its limits and its errors are
those of ``poolrag serve``; Ray adds the routing between replicas. Ray's proxy reads the request
first: its own HTTP server applies none of poolrag's limits on a request's head (size, deadline),
and it hands a request to a replica before its body is read, so a body's limits and the API key
are checked in the replica. The proxy holds at most one replica's queue of waiting requests.

A replica takes one GPU when the cluster has GPUs (so replicas = GPUs at most), else a share of
CPU cores. Replica count is fixed (``replicas``) or follows load: Ray Serve's autoscaler adds
replicas while each has more than ``target_ongoing_requests`` requests in flight, up to
``max_replicas``.

Per-replica state stays per replica: the admission queue (``--max-queue``) and ``/metrics`` count
one replica's requests. Without Ray, the same result is several ``poolrag serve`` processes
behind any HTTP load balancer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray import serve
from ray.serve import Application

from poolrag.counts import check_count
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.loaded_objects import freeze_loaded_objects
from poolrag.server.run import ANSWER_GRACE_S
from poolrag.server.settings import ServerSettings

logger = logging.getLogger(__name__)

APP_NAME = "poolrag"


def load_engines(models: Sequence[tuple[EngineArgs, ServerSettings]]) -> list[tuple[Any, ServerSettings]]:
    """A replica's engines, loaded where this runs; what loading made is then left out of Python's
    cyclic collections, as a single ``poolrag serve`` process leaves it."""
    from poolrag.engine import Engine

    engines = [(Engine.from_engine_args(engine_args), settings) for engine_args, settings in models]
    freeze_loaded_objects()
    return engines


#: How often a replica asks Ray Serve whether its application is being removed (well within the
#: ANSWER_GRACE_S Ray's kill deadline leaves past the drain window).
REMOVAL_POLL_S = 2.0


def _being_removed(app: str) -> bool:
    """Whether Ray Serve is removing application ``app`` (or has removed it). One application's
    status, from the controller: ``serve.status()`` would copy every application's details."""
    from ray.serve.context import _get_global_client

    status = _get_global_client().get_serve_status(app).app_status.status
    return status in ("DELETING", "NOT_STARTED")  # a str Enum: NOT_STARTED once it is gone


@serve.ingress()
class PoolragReplica:
    """One replica: its engines (one per model, several sharing the replica's cores or GPU) and
    the app serving them (built on the replica, after the engines).

    When its application is removed (the command stopped, or ``serve delete``), Ray lets the
    requests in flight run until its graceful-shutdown deadline and then kills the replica, each
    request cut with a text/plain 500. A replica watches for that removal and closes its engines
    once the drain window (``--timeout-graceful-shutdown``) has passed, so the requests still
    running then are answered JSON 503 (shutting down) as ``poolrag serve`` answers them; Ray's
    deadline is :data:`~poolrag.server.run.ANSWER_GRACE_S` later. (A replica Ray stops otherwise,
    scaling down or replacing it, gets no new requests and keeps Ray's deadline.)"""

    def __init__(self, models: Sequence[tuple[EngineArgs, ServerSettings]]) -> None:
        self.engines = load_engines(models)
        drain_s = models[0][1].drain_timeout_s
        app = serve.get_replica_context().app_name
        threading.Thread(
            target=self._close_when_removed, args=(app, drain_s), name="poolrag-drain", daemon=True
        ).start()

    def _close_when_removed(self, app: str, drain_s: float) -> None:
        while not all(engine.closed for engine, _ in self.engines):
            time.sleep(REMOVAL_POLL_S)
            try:
                removed = _being_removed(app)
            except Exception:  # the controller restarting: ask again
                logger.debug("ray serve status unavailable", exc_info=True)
                continue
            if removed:
                time.sleep(drain_s)
                for engine, _ in self.engines:
                    try:
                        engine.close()
                    except Exception:
                        logger.warning("closing an engine at the end of the drain failed", exc_info=True)
                return

    def check_health(self) -> None:
        """Ray's periodic health check: a replica whose engine stopped (its scheduler died) is
        replaced, where ``/health`` alone would answer 503 from it while Ray kept routing to it."""
        for engine, settings in self.engines:
            if engine.closed:
                raise RuntimeError(f"the engine of {settings.model_name!r} stopped")

    def __serve_build_asgi_app__(self) -> Any:
        from poolrag.server.app import create_models_app

        return create_models_app(self.engines)


@dataclass(frozen=True)
class ReplicaPlan:
    """How many replicas and what each reserves.

    Args:
        replicas: a fixed count, or ``None`` to autoscale between 1 and ``max_replicas``.
        max_replicas: autoscaling ceiling (``None``: one per GPU, or CPUs / ``cpus_per_replica``).
        target_ongoing_requests: requests in flight per replica the autoscaler aims for.
        gpus_per_replica: ``None``: 1 when the cluster has GPUs, else 0.
        cpus_per_replica: CPU cores each replica reserves (its torch threads).
    """

    replicas: int | None = 1
    max_replicas: int | None = None
    target_ongoing_requests: float = 8.0
    gpus_per_replica: float | None = None
    cpus_per_replica: float = 1.0

    def deployment_options(self, cluster: Mapping[str, float]) -> dict[str, Any]:
        """Ray Serve deployment options on a cluster with these resources."""
        gpus = self.gpus_per_replica
        if gpus is None:
            gpus = 1.0 if cluster.get("GPU", 0) >= 1 else 0.0
        actor = {"num_cpus": self.cpus_per_replica, "num_gpus": gpus}
        if self.replicas is not None:
            return {"num_replicas": check_count(self.replicas, "replicas"), "ray_actor_options": actor}
        ceiling = self.max_replicas
        if ceiling is None:
            per = gpus if gpus else self.cpus_per_replica
            ceiling = max(int(cluster.get("GPU" if gpus else "CPU", 1) // per), 1)
        return {
            "autoscaling_config": {
                "min_replicas": 1,
                "max_replicas": ceiling,
                "target_ongoing_requests": self.target_ongoing_requests,
            },
            "ray_actor_options": actor,
        }


def build_application(
    models: Sequence[tuple[EngineArgs, ServerSettings]],
    plan: ReplicaPlan,
    cluster: Mapping[str, float],
) -> Application:
    """The deployment of ``models`` (each replica runs all of them, the first answering requests
    that name none) with ``plan``'s replicas, ready for :func:`ray.serve.run`."""
    if not models:
        raise InvalidInputError("a Ray Serve replica needs at least one model")
    deployment = replica_deployment(models, plan, cluster)
    replicas = [(args.for_other_processes(), settings) for args, settings in models]
    logger.info("ray serve: %s on %s", ", ".join(args.model for args, _ in replicas), deployment)
    return deployment.bind(replicas)


def replica_deployment(
    models: Sequence[tuple[EngineArgs, ServerSettings]], plan: ReplicaPlan, cluster: Mapping[str, float]
) -> Any:
    """The Ray Serve deployment of :class:`PoolragReplica` for ``models`` with ``plan``'s replicas."""
    options = plan.deployment_options(cluster)
    # the proxy's admission cap per replica matches the app's own queue limits, all models together;
    # as many again may wait in the proxy, and the next is a 503 (Ray's default: no bound, each
    # waiting request's body buffered in the proxy)
    per_replica = sum(settings.max_queue for _, settings in models)
    return serve.deployment(
        PoolragReplica,
        name=APP_NAME,
        max_ongoing_requests=per_replica,
        max_queued_requests=per_replica,
        # the replica answers what is left 503 once the drain window ends (PoolragReplica)
        graceful_shutdown_timeout_s=models[0][1].drain_timeout_s + ANSWER_GRACE_S,
        **options,
    )


def running_proxy_address() -> tuple[str, int] | None:
    """The ``(host, port)`` the proxy of a Ray Serve already running on the connected cluster
    listens on, or ``None`` when Serve does not run there. A running Serve keeps the HTTP options
    it was started with (a later ``serve.start`` only warns that it ignored the new ones), so a
    command joining it must serve on them; no public API names them."""
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    if client is None:
        return None
    config = client.http_config
    return str(config.host), int(config.port)


def serve_models_on_ray(
    models: Sequence[tuple[EngineArgs, ServerSettings]],
    plan: ReplicaPlan,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    blocking: bool = True,
) -> None:
    """Deploy replicas each serving every one of ``models`` on the connected cluster (``ray.init``
    first) and answer HTTP on ``host:port``.

    ``blocking``: wait until interrupted (the CLI), else return once the replicas are ready.
    """
    import ray

    # Serve's controller, proxy and replicas log at Ray's level here (connect's log_level): their
    # INFO lines (one per request, per replica start) are Ray's to tell only when asked for
    level = logging.getLevelName(max(logging.INFO, logging.getLogger("ray").getEffectiveLevel()))
    logging_config = {"log_level": level}
    running = running_proxy_address()
    if running is not None and running != (host, port):
        raise InvalidInputError(
            f"Ray Serve already runs on this cluster with its proxy on {running[0]}:{running[1]}, and "
            f"keeps it there: serve on it (--host {running[0]} --port {running[1]}), or stop that "
            "Serve first (`serve shutdown`)"
        )
    app = build_application(models, plan, ray.cluster_resources())
    http_options = {"host": host, "port": port, "keep_alive_timeout_s": models[0][1].keep_alive_s}
    serve.start(http_options=http_options, logging_config=logging_config)
    try:
        serve.run(app, name=APP_NAME, route_prefix="/", blocking=blocking, logging_config=logging_config)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where the caller makes it one (the CLI does)
        # as Ray's own `serve run` ends: on a cluster this command joined, the app would go on
        # answering after the command that started it was stopped
        logger.info("removing the %r application from Ray Serve", APP_NAME)
        serve.delete(APP_NAME)
        raise
