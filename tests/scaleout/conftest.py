"""The in-process Ray cluster (loopback, 2 CPUs, no dashboard), shared by the modules that use it.

Ray waits a fixed 30 s for a new node's raylet to register, and on a busy 2-core machine a start
runs out of it when another cluster is alive or one has just shut down. So the in-process cluster
starts once, not once per module, and is stopped before a test whose subprocess starts its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray", reason="the ray extra runs in the nox 'ray' session")


@pytest.fixture(scope="module")
def ray_cluster() -> None:
    """This process connected to a local cluster: started by the first module that asks for one."""
    if ray.is_initialized():
        return
    # Workers inherit the driver's environment: the same offline model loading as the tests.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        address="local",  # never a `ray start` cluster that happens to run on this machine
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
    )


@pytest.fixture
def no_cluster_in_process() -> None:
    """For tests whose subprocess starts its own local cluster: this process's is stopped first."""
    ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def _stop_ray_at_the_end() -> Iterator[None]:
    yield
    ray.shutdown()
