"""Joining a Ray cluster: the one place the ``--ray [ADDRESS]`` flags turn into ``ray.init``."""

from __future__ import annotations

import logging
import os
import socket

import ray

from poolrag.cpu_budget import usable_cpus
from poolrag.errors import InvalidInputError

logger = logging.getLogger(__name__)

#: ``--ray`` given without an address: a cluster of this machine alone, started for the run.
LOCAL = "local"
#: what Ray's start-up timeouts say: a node that did not register (a bare Exception), a GCS server
#: that did not write its port in time (a RuntimeError)
_STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")
#: seconds a local head waits for its GCS server's port (Ray's own default, 30, ran out once on a busy
#: 2-core machine), set through Ray's variable unless the user set it
GCS_PORT_WAIT_VARIABLE, GCS_PORT_WAIT_S = "RAY_gcs_server_port_wait_time_s", "120"
#: local starts tried before a start-up timeout is raised (two timed out in a row under CI load)
START_ATTEMPTS = 3
#: the niceness of a local cluster's workers, set through Ray's variable unless the user set it. Ray's
#: 15 lets every other process on the machine go first, yet here the workers do the run's work (load
#: the model, embed): beside two busy processes on the 2-core EPYC, a Ray ingest took 2.8× as long at
#: 15 as at 0, the niceness the same run has without Ray
WORKER_NICENESS_VARIABLE, WORKER_NICENESS = "RAY_worker_niceness", "0"


def connect(
    address: str | None = LOCAL, *, num_cpus: int | None = None, log_level: int = logging.WARNING
) -> None:
    """Connect to the cluster at ``address`` (``ray://host:10001``, ``host:6379`` or ``auto``), or
    start one on this machine (``local`` / ``None``). A no-op when already connected.

    ``num_cpus``: CPUs a local cluster offers (default: those this process may use, its affinity
    mask cut to a container's CPU quota: Ray counts the host's under ``taskset``); ignored when
    joining one.
    ``log_level``: what Ray itself prints here (its start-up, Ray Data's and Ray Serve's
    progress lines); the commands keep WARNING unless run verbose, so a user reads poolrag's
    lines rather than twenty of Ray's.
    """
    if ray.is_initialized():
        return
    if address in (None, LOCAL):
        _start_local(num_cpus, log_level)
    else:
        _check_answers(address)
        try:
            ray.init(address=address, log_to_driver=True, logging_level=log_level)
        except (ValueError, ConnectionError) as exc:  # a malformed address, a cluster that is not there
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ClusterUnreachableError(f"--ray {address}: {first}") from exc
    resources = ray.cluster_resources()
    logger.info(
        "ray cluster %s: %d nodes, %g CPUs, %g GPUs",
        address or LOCAL,
        len(ray.nodes()),
        resources.get("CPU", 0),
        resources.get("GPU", 0),
    )


class ClusterUnreachableError(InvalidInputError):
    """``--ray ADDRESS`` names no cluster this machine can join."""


#: seconds a ``host:port`` address gets to accept a connection before the run is refused (Ray's own
#: connection attempts to a port nothing listens on went on for minutes)
CONNECT_CHECK_S = 10.0


def _check_answers(address: str) -> None:
    """Refuse at once a ``host:port`` (or ``ray://host:port``) where nothing accepts connections;
    ``auto`` and anything else go to Ray, which says what it makes of them."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or "/" in target:
        if address != "auto" and not address.startswith("ray://"):
            raise ClusterUnreachableError(
                f"--ray {address}: give a cluster as HOST:PORT (its GCS, e.g. head:6379), "
                "ray://HOST:PORT (Ray Client) or auto (the cluster this node belongs to)"
            )
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_CHECK_S).close()
    except OSError as exc:
        raise ClusterUnreachableError(
            f"--ray {address}: nothing answers there ({exc.strerror or exc}); start the cluster "
            "(ray start --head) or leave the address out to start one on this machine"
        ) from exc


def _start_local(num_cpus: int | None, log_level: int) -> None:
    """Start a cluster of this machine alone for the run. Its node advertises 127.0.0.1, so no other
    machine's node joins it; Ray's own servers (GCS, raylet, agents) still listen on every
    interface, guarded by Ray's token authentication, which is on unless ``RAY_AUTH_MODE`` turns it
    off (the test suite does; a shared or exposed machine should not).

    Ray gives a new node a fixed 30 s to register and has no setting for it; on a busy small machine
    a start can run out of it, and a later start usually succeeds, so a timed-out start is tried
    again (``START_ATTEMPTS`` in all). Its wait for the GCS server's port has a setting, raised here,
    and its workers run at this process's priority rather than below every other process's.
    """
    os.environ.setdefault(GCS_PORT_WAIT_VARIABLE, GCS_PORT_WAIT_S)
    os.environ.setdefault(WORKER_NICENESS_VARIABLE, WORKER_NICENESS)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            ray.init(
                address=LOCAL,  # never a `ray start` cluster that happens to run on this machine
                num_cpus=usable_cpus() if num_cpus is None else num_cpus,
                include_dashboard=False,
                log_to_driver=True,
                logging_level=log_level,
                _node_ip_address="127.0.0.1",
            )
            return
        except Exception as exc:
            if attempt == START_ATTEMPTS or not any(said in str(exc) for said in _STARTUP_TIMEOUTS):
                raise
            logger.warning("the local ray cluster did not start in time (%s); starting it again", exc)
            ray.shutdown()
