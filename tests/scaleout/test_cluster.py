"""Starting a local cluster: Ray's fixed start-up wait running out once is not the end of a run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import ray
from ray import cloudpickle

from poolrag.scaleout import cluster

# _niceness travels to the workers by value (they cannot import this test module)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _fail_first(monkeypatch: pytest.MonkeyPatch, error: Exception, times: int = 1) -> list[dict]:
    calls: list[dict] = []
    real_init = ray.init

    def init(**kwargs):
        calls.append(kwargs)
        if len(calls) <= times:
            raise error
        return real_init(**kwargs)

    monkeypatch.setattr(ray, "init", init)
    return calls


@pytest.mark.parametrize(
    "timeout",
    [
        Exception("The current node timed out during startup. This could happen because ..."),
        RuntimeError("Timed out waiting for file /tmp/ray/session_x/gcs_server_port_0123"),
    ],
    ids=["node", "gcs-port"],
)
def test_a_start_that_timed_out_is_tried_again(
    no_cluster_in_process, monkeypatch, caplog, timeout: Exception
) -> None:
    monkeypatch.delenv(cluster.GCS_PORT_WAIT_VARIABLE, raising=False)
    # the staged timeout takes one attempt: the real starts after it keep a user's full count
    monkeypatch.setattr(cluster, "START_ATTEMPTS", cluster.START_ATTEMPTS + 1)
    calls = _fail_first(monkeypatch, timeout)
    cluster.connect(cluster.LOCAL, num_cpus=2)
    assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 2
    # the real start that follows may itself time out on a loaded machine, and is then tried again
    assert 2 <= len(calls) <= cluster.START_ATTEMPTS and calls[1]["address"] == "local"
    assert "starting it again" in caplog.text
    assert os.environ[cluster.GCS_PORT_WAIT_VARIABLE] == cluster.GCS_PORT_WAIT_S  # Ray's 30 s, raised


def _niceness() -> int:
    return os.nice(0)


def _worker_niceness() -> int:
    return ray.get(ray.remote(_niceness).remote())


def test_a_local_clusters_workers_run_at_this_processs_priority(ray_cluster) -> None:
    """Not Ray's 15, below every other process on the machine: the workers do the run's work."""
    assert _worker_niceness() == os.nice(0)


def test_a_users_gcs_port_wait_and_worker_niceness_win(no_cluster_in_process, monkeypatch) -> None:
    monkeypatch.setenv(cluster.GCS_PORT_WAIT_VARIABLE, "45")
    monkeypatch.setenv(cluster.WORKER_NICENESS_VARIABLE, "7")
    cluster.connect(cluster.LOCAL, num_cpus=2)
    assert ray.is_initialized() and os.environ[cluster.GCS_PORT_WAIT_VARIABLE] == "45"
    assert _worker_niceness() == 7


def test_a_start_that_keeps_timing_out_is_raised_after_the_last_attempt(
    no_cluster_in_process, monkeypatch
) -> None:
    timeout = Exception("The current node timed out during startup. This could happen because ...")
    calls = _fail_first(monkeypatch, timeout, times=cluster.START_ATTEMPTS)
    with pytest.raises(Exception, match="timed out during startup"):
        cluster.connect(cluster.LOCAL, num_cpus=2)
    assert len(calls) == cluster.START_ATTEMPTS and not ray.is_initialized()


def test_any_other_failure_is_raised_at_once(no_cluster_in_process, monkeypatch) -> None:
    calls = _fail_first(monkeypatch, ValueError("bad resources"))
    with pytest.raises(ValueError, match="bad resources"):
        cluster.connect(cluster.LOCAL, num_cpus=2)
    assert len(calls) == 1 and not ray.is_initialized()


LOCAL_CPUS = """
import ray
from poolrag.scaleout import cluster

cluster.connect(cluster.LOCAL)
print(int(ray.cluster_resources()["CPU"]))
ray.shutdown()
"""


def test_a_local_cluster_started_under_taskset_offers_the_cpus_of_the_mask(no_cluster_in_process) -> None:
    """``taskset -c 0 poolrag ingest --ray``: Ray's own count is the host's CPUs, and an actor given
    its share would run that many torch threads on the one CPU it may use."""
    one_cpu = min(os.sched_getaffinity(0))
    run = subprocess.run(
        [sys.executable, "-c", LOCAL_CPUS],
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        preexec_fn=lambda: os.sched_setaffinity(0, {one_cpu}),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "1"
