"""A Ray cluster of this machine alone (loopback, 2 CPUs, no dashboard), one per test module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray", reason="the ray extra runs in the nox 'ray' session")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    # Workers inherit the driver's environment: the same offline model loading as the tests.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
    )
    try:
        yield
    finally:
        ray.shutdown()
