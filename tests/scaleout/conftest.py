"""A Ray cluster of this machine alone (loopback, 2 CPUs, no dashboard), one per test session.

One start, not one per module: starting a head node right after the previous one shut down is when
Ray's fixed 30-second raylet registration wait runs out on a busy 2-core machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray", reason="the ray extra runs in the nox 'ray' session")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    # Workers inherit the driver's environment: the same offline model loading as the tests.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        address="local",  # never a `ray start` cluster that happens to run on this machine
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
    )
    try:
        yield
    finally:
        ray.shutdown()
