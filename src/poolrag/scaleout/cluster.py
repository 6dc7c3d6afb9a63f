"""Joining a Ray cluster: the one place the ``--ray [ADDRESS]`` flags turn into ``ray.init``."""

from __future__ import annotations

import logging

import ray

logger = logging.getLogger(__name__)

#: ``--ray`` given without an address: a cluster of this machine alone, started for the run.
LOCAL = "local"


def connect(address: str | None = LOCAL, *, num_cpus: int | None = None) -> None:
    """Connect to the cluster at ``address`` (``ray://host:10001``, ``host:6379`` or ``auto``), or
    start one on this machine (``local`` / ``None``, loopback only). A no-op when already connected.

    ``num_cpus``: CPUs a local cluster offers (default: all); ignored when joining one.
    """
    if ray.is_initialized():
        return
    if address in (None, LOCAL):
        # loopback only: nothing outside this machine can reach a cluster started for one run
        ray.init(
            address=LOCAL,
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=True,
            _node_ip_address="127.0.0.1",
        )
    else:
        ray.init(address=address, log_to_driver=True)
    resources = ray.cluster_resources()
    logger.info(
        "ray cluster %s: %d nodes, %g CPUs, %g GPUs",
        address or LOCAL,
        len(ray.nodes()),
        resources.get("CPU", 0),
        resources.get("GPU", 0),
    )
