"""``poolrag serve --workers N``: N server processes on one port, each with its own engine, whose
metrics add up, a dead one replaced, all stopped together (:mod:`poolrag.server.workers`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from poolrag import Engine
from poolrag.cpu_budget import usable_cpus
from poolrag.server.workers import listening_socket
from poolrag.worker_threads import worker_threads

from .conftest import cli_server, metric_samples, wait_for_body_bytes

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the process tree from /proc")

NAME = "minilm"
EMBEDDINGS = ("poolrag_requests_total", (("path", "/v1/embeddings"), ("status", "200")))


@dataclass
class Pool:
    url: str
    parent: subprocess.Popen[bytes]
    metrics_dir: Path
    log: Path

    def workers(self) -> set[int]:
        """The parent's server processes (not multiprocessing's resource tracker)."""
        children = Path(f"/proc/{self.parent.pid}/task/{self.parent.pid}/children").read_text().split()
        return {int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()}

    def wait_for_workers(
        self, count: int, other_than: set[int] = frozenset(), timeout: float = 120
    ) -> set[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.workers()
            if len(pids) == count and not pids & other_than:
                return pids
            time.sleep(0.2)
        raise AssertionError(f"no {count} workers after {timeout} s:\n{self.log.read_text()[-3000:]}")

    def wait_until_serving(self, count: int, timeout: float = 120) -> set[int]:
        """The workers once the parent says every one serves: a worker killed before it served is a
        failed start, which stops the pool (a worker process that exists may still be loading)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            said = re.search(rf"{count} workers \(pids ([\d, ]+)\) serving on", self.log.read_text())
            if said:
                return {int(pid) for pid in said[1].split(", ")}
            time.sleep(0.2)
        raise AssertionError(
            f"{count} workers not serving after {timeout} s:\n{self.log.read_text()[-3000:]}"
        )


@contextmanager
def two_workers(minilm_path: Path, tmp_path: Path, *flags: str, new_session: bool = False) -> Iterator[Pool]:
    # a metrics directory of the test's own, so it can see which workers wrote (else the parent
    # makes one and removes it at exit)
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    log = tmp_path / "server.log"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    args = (str(minilm_path), "--served-model-name", NAME, "--workers", "2", *flags)
    with cli_server(log, *args, env=env, new_session=new_session) as (url, parent):
        pool = Pool(url, parent, metrics_dir, log)
        pool.wait_until_serving(2)
        yield pool


def _worker_count(metrics_dir: Path, pid: int, tmp_path: Path) -> float:
    """The ``/v1/embeddings`` answers one worker counted: its counter file, collected on its own."""
    alone = tmp_path / f"worker-{pid}"
    alone.mkdir()
    shutil.copy(metrics_dir / f"counter_{pid}.db", alone)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(alone))
    return registry.get_sample_value(EMBEDDINGS[0], dict(EMBEDDINGS[1])) or 0.0


def _embed_one_connection_each(url: str, texts: list[str]) -> np.ndarray:
    """Each request on a connection of its own, so the kernel spreads them over the workers."""
    rows = []
    for text in texts:
        answer = httpx.post(f"{url}/v1/embeddings", json={"model": NAME, "input": text}, timeout=60)
        assert answer.status_code == 200, answer.text
        rows.append(answer.json()["data"][0]["embedding"])
    return np.array(rows, dtype=np.float32)


def test_each_worker_has_its_share_of_the_cpus() -> None:
    cpus = usable_cpus()  # the affinity mask, cut to a container's CPU quota
    assert worker_threads(1) == cpus
    assert worker_threads(2) == max(1, cpus // 2)
    assert worker_threads(cpus * 4) == 1


def test_the_workers_sockets_share_one_port_and_a_port_another_program_holds_is_named() -> None:
    first = listening_socket("127.0.0.1", 0)
    second = listening_socket("127.0.0.1", first.getsockname()[1])  # beside its sibling
    assert second.getsockname() == first.getsockname()
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{taken}"):
            listening_socket("127.0.0.1", taken)
    first.close()
    second.close()


def test_two_workers_answer_on_one_port_with_the_engines_vectors_and_metrics_that_add_up(
    minilm_path: Path, minilm_engine: Engine, tmp_path: Path
) -> None:
    texts = [f"question {i}: how do I reset my password on the website?" for i in range(24)]
    with two_workers(minilm_path, tmp_path) as pool:
        before = metric_samples(pool.url).get(EMBEDDINGS, 0.0)
        served = _embed_one_connection_each(pool.url, texts)
        # the same vectors as one process (a worker runs fewer torch threads: sums in another order)
        np.testing.assert_allclose(served, minilm_engine.embed_array(texts), atol=1e-5)
        # both workers served some of them (each worker's own counts, read from its file alone)
        shares = [_worker_count(pool.metrics_dir, pid, tmp_path) for pid in sorted(pool.workers())]
        assert all(share > 0 for share in shares) and sum(shares) == before + len(texts)
        # and every scrape, whichever worker answers it, counts both workers' requests
        for _ in range(4):
            samples = metric_samples(pool.url)
            assert samples[EMBEDDINGS] == before + len(texts)
            assert samples["poolrag_engine_sequences_total", (("model", NAME),)] >= len(texts)
            assert samples["poolrag_queue_depth", (("model", NAME),)] == 0


def test_a_killed_worker_is_replaced_on_its_port_and_a_signal_stops_them_all(
    minilm_path: Path, tmp_path: Path
) -> None:
    with two_workers(minilm_path, tmp_path) as pool:
        first = pool.workers()
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        # the other worker answers meanwhile; connections sent to the dead one's socket wait for
        # its replacement instead of being refused
        _embed_one_connection_each(pool.url, ["still answering"] * 6)
        replaced = pool.wait_for_workers(2, other_than={victim})
        assert replaced - first and first - {victim} <= replaced
        assert f"worker {victim} was killed by signal 9; starting another" in pool.log.read_text()
        _embed_one_connection_each(pool.url, ["answered again"] * 6)

        pool.parent.send_signal(signal.SIGTERM)
        assert pool.parent.wait(timeout=60) == 0
        for pid in replaced:
            assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


def _trickled_request(url: str, seconds: float, stop: Callable[[], None]) -> bytes:
    """An embedding request whose body arrives over ``seconds`` (a slow client, an upload),
    ``stop`` called once its first bytes are in: the raw answer, or what came before the server
    closed the connection."""
    host, port = url.removeprefix("http://").split(":")
    pieces = int(seconds / 0.25)
    start, end = f'{{"model": "{NAME}", "input": "'.encode(), b'"}'
    head = f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    length = len(start) + 4 * pieces + len(end)
    with socket.create_connection((host, int(port)), timeout=120) as client:
        client.sendall(f"{head}Content-Length: {length}\r\n\r\n".encode() + start)
        wait_for_body_bytes(url, len(start))  # a worker has the request, not the listen queue
        stop()
        with contextlib.suppress(OSError):  # a killed worker's connection is reset
            for _ in range(pieces):
                time.sleep(0.25)
                client.sendall(b"word")
            client.sendall(end)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := client.recv(65536):
                answer += chunk
    return answer


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_whole_process_group_drains_the_requests_in_flight(
    sig: signal.Signals, minilm_path: Path, tmp_path: Path
) -> None:
    """systemd (KillMode=control-group, its default), dumb-init and a terminal's Ctrl-C signal every
    process of the group: each worker heard the signal and then its parent's SIGTERM, took that for
    a second signal and answered its requests 503 at once instead of letting them finish."""
    with two_workers(minilm_path, tmp_path, new_session=True) as pool:
        answer = _trickled_request(pool.url, 3.0, lambda: os.killpg(pool.parent.pid, sig))
        assert pool.parent.wait(timeout=60) == 0
    assert answer.startswith(b"HTTP/1.1 200"), (answer[:300], pool.log.read_text()[-3000:])
    assert "still running are answered 503" not in pool.log.read_text()


def test_ctrl_c_while_the_workers_load_stops_them_without_a_traceback(
    minilm_path: Path, tmp_path: Path
) -> None:
    """A terminal's Ctrl-C reaches the workers too: each one still loading printed a
    KeyboardInterrupt traceback of wherever its imports were."""
    log = tmp_path / "server.log"
    parent = _start_two_workers(minilm_path, log)
    try:
        Pool("", parent, tmp_path, log).wait_for_workers(2)
        os.killpg(parent.pid, signal.SIGINT)
        assert parent.wait(timeout=60) == 0
    finally:
        if parent.poll() is None:
            parent.kill()
    assert "serving on" not in log.read_text()  # stopped while loading, as meant
    assert "Traceback" not in log.read_text() and "KeyboardInterrupt" not in log.read_text(), log.read_text()


def _start_two_workers(minilm_path: Path, log: Path) -> subprocess.Popen[bytes]:
    """``poolrag serve --workers 2`` in a process group of its own, not waited on (its workers load)."""
    command = [
        sys.executable,
        "-m",
        "poolrag.cli",
        "serve",
        str(minilm_path),
        "--workers",
        "2",
        "--port",
        "0",
    ]
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            start_new_session=True,
        )


def test_sigint_to_one_worker_stops_it_and_the_parent_starts_another(
    minilm_path: Path, tmp_path: Path
) -> None:
    """The parent blocks SIGINT while it starts a worker, and the worker inherited the mask for good:
    ``kill -INT`` of a worker (what stops a uvicorn or gunicorn worker) was held back, unheard."""
    with two_workers(minilm_path, tmp_path) as pool:
        first = pool.wait_until_serving(2)
        # each of them: the first one's start also starts multiprocessing's resource tracker, which
        # unblocks SIGINT on its way out, so only the later ones were started with it blocked
        for pid in first:
            os.kill(pid, signal.SIGINT)
        pool.wait_for_workers(2, other_than=first, timeout=60)
        for pid in first:
            assert f"worker {pid} exited with status 0; starting another" in pool.log.read_text()


def test_workers_whose_parent_was_killed_as_they_loaded_exit_without_a_traceback(
    minilm_path: Path, tmp_path: Path
) -> None:
    """A worker watched its parent only once it served: killed while they loaded, the parent left
    them loading on (minutes for a large model, its GPU memory held) to die on their ready report
    with a BrokenPipeError traceback each."""
    log = tmp_path / "server.log"
    parent = _start_two_workers(minilm_path, log)
    workers = Pool("", parent, tmp_path, log).wait_for_workers(2)
    assert not _orphans_left(parent, workers), log.read_text()[-3000:]
    assert "serving on" not in log.read_text()  # killed as they loaded, as meant
    assert "the parent process is gone; stopping" in log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_without_sigusr1_or_so_reuseport_workers_are_refused_in_one_line(minilm_path: Path) -> None:
    """Windows has neither: ``poolrag serve --workers 2`` ended in an AttributeError traceback as the
    workers' module read ``signal.SIGUSR1``, not the line that says what --workers needs."""
    as_on_windows = (
        "import signal, socket, sys\n"
        "del signal.SIGUSR1, signal.pthread_sigmask, socket.SO_REUSEPORT\n"
        "from poolrag.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", as_on_windows, "serve", str(minilm_path), "--workers", "2", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2, done.stderr
    assert "--workers needs SO_REUSEPORT" in done.stderr and "Traceback" not in done.stderr


def test_a_second_signal_to_the_parent_answers_the_workers_requests_at_once(
    minilm_path: Path, tmp_path: Path
) -> None:
    """The parent heard a second SIGTERM and did nothing with it: its workers drained on."""

    def twice() -> None:
        pool.parent.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        pool.parent.send_signal(signal.SIGTERM)

    with two_workers(minilm_path, tmp_path) as pool:
        answer = _trickled_request(pool.url, 4.0, twice)
        assert pool.parent.wait(timeout=60) == 0
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), (answer[:300], pool.log.read_text()[-3000:])
    assert json.loads(body)["error"]["code"] == "engine_closed"


def test_workers_drain_for_the_whole_graceful_shutdown_window(minilm_path: Path, tmp_path: Path) -> None:
    """The parent killed its workers 30 s after SIGTERM whatever --timeout-graceful-shutdown said:
    a request in flight past then lost its connection without an answer."""
    with two_workers(
        minilm_path, tmp_path, "--timeout-graceful-shutdown", "45", "--body-timeout", "120"
    ) as pool:
        answer = _trickled_request(pool.url, 36.0, lambda: pool.parent.send_signal(signal.SIGTERM))
        assert pool.parent.wait(timeout=90) == 0
    assert answer.startswith(b"HTTP/1.1 200"), (answer[:300], pool.log.read_text()[-3000:])


def test_workers_whose_parent_was_killed_stop_instead_of_serving_on(
    minilm_path: Path, tmp_path: Path
) -> None:
    """``kill -9`` of the parent (or a supervisor that kills the main process only) left its
    workers serving the port with no one to replace or stop them, and beside the workers of a
    server started again on that port (``SO_REUSEPORT``)."""
    with two_workers(minilm_path, tmp_path, new_session=True) as pool:
        workers = pool.wait_until_serving(2)
        assert not _orphans_left(pool.parent, workers), pool.log.read_text()[-3000:]
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{pool.url}/health", timeout=10)
    assert "the parent process is gone; stopping" in pool.log.read_text()


def _orphans_left(parent: subprocess.Popen[bytes], workers: set[int]) -> set[int]:
    """Kills ``parent`` (``kill -9``) and gives its ``workers`` 90 s to stop: those still running
    then, killed too."""
    parent.kill()
    parent.wait(timeout=30)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and any(_running(pid) for pid in workers):
        time.sleep(0.2)
    left = {pid for pid in workers if _running(pid)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]


def _running(pid: int) -> bool:
    """Neither gone nor a zombie its new parent has not reaped."""
    try:
        return "Z" not in _state(pid)
    except FileNotFoundError:
        return False


def test_a_model_that_cannot_load_ends_the_command_with_its_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    missing.mkdir()  # a folder without config.json: the workers' engines refuse it
    done = subprocess.run(
        [sys.executable, "-m", "poolrag.cli", "serve", str(missing), "--workers", "2", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2
    assert done.stderr.count("poolrag serve: cannot start:") == 1  # once, not once per worker
    assert "config" in done.stderr and "Traceback" not in done.stderr


def test_workers_are_for_one_machine_not_for_ray(minilm_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "poolrag.cli", "serve", str(minilm_path), "--workers", "2", "--ray"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--workers is for one machine" in done.stderr and "Traceback" not in done.stderr
