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

from poolrag.scaleout.cluster import LOCAL, connect  # noqa: E402


@pytest.fixture(scope="module")
def ray_cluster() -> None:
    """This process connected to a local cluster: started by the first module that asks for one."""
    # Workers inherit the driver's environment (tests/conftest.py: offline model loading).
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    connect(LOCAL, num_cpus=2)


@pytest.fixture
def no_cluster_in_process() -> None:
    """For tests whose subprocess starts its own local cluster: this process's is stopped first."""
    ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def _stop_ray_at_the_end() -> Iterator[None]:
    yield
    ray.shutdown()
