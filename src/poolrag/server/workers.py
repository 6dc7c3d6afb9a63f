"""Several server processes on one port (``poolrag serve --workers N``), each with its own engine.

One Python process answers requests on one event loop, and its per-request work (HTTP, the body
model, tokenising, the answer's JSON) holds the GIL: with a fast forward (a small model, a GPU) that
loop is the ceiling long before the cores are (benchmarks/RESULTS.md, serve_vs_servers). N workers
each load the model and serve on their own loop, as uvicorn's and gunicorn's ``--workers`` do.
Unlike vLLM's ``--api-server-count`` (HTTP processes in front of one engine), every worker batches
on its own, so each holds a copy of the weights: a trade meant for small and mid-size models.

The parent binds one ``SO_REUSEPORT`` socket per worker, so the kernel spreads new connections over
the workers by their address rather than by which worker's loop is first to accept, and keeps them:
a worker that dies is replaced on the same socket, and the connections queued for it wait instead
of being refused. Each worker takes ``cores / N`` torch threads, of the cores a container's CPU
quota leaves (``OMP_NUM_THREADS`` wins; :mod:`poolrag.worker_threads`, which ``poolrag tune
--workers N`` measures with). ``/metrics`` adds
up every worker's series (prometheus_client's multiprocess mode, in a directory the parent makes and
removes; :mod:`poolrag.server.metrics`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolrag.server.run import ANSWER_GRACE_S, DrainingServer, listening_socket, uvicorn_config
from poolrag.server.settings import HttpOptions
from poolrag.server.unix_socket import UnixListener
from poolrag.worker_threads import take_worker_threads, worker_threads

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from poolrag.server.settings import ServerSettings

logger = logging.getLogger(__name__)

#: prometheus_client's switch to multiprocess mode: the directory its values live in.
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
#: Seconds past ``--timeout-graceful-shutdown`` a stopping worker gets before it is killed: its own
#: deadlines come first (the closed engines' 503s, uvicorn's cancel of what is left, the app's shutdown).
STOP_GRACE_S = 3 * ANSWER_GRACE_S
#: The parent's stop, passed on to its workers: a signal neither a terminal nor a service manager
#: sends, so a worker tells it from the SIGINT or SIGTERM the whole process group got. Windows has
#: none (nor the ``SO_REUSEPORT`` :class:`WorkerPool` refuses to start without), yet imports this.
PARENT_STOP: int = getattr(signal, "SIGUSR1", signal.SIGTERM)

#: Builds the app and its settings in the worker process (pickled to it by reference).
AppBuilder = Callable[[], "tuple[FastAPI, ServerSettings]"]


class WorkerStartError(RuntimeError):
    """A worker could not build its app (a model that cannot load, a bad option): the pool stopped."""


def _work(
    build: AppBuilder, sock: socket.socket, threads: int, http: HttpOptions, report: Connection
) -> None:
    """A worker process: its torch threads, its engines and app, then uvicorn on its socket. It
    reports ``None`` once its app is built, or why it could not build one."""
    # the parent blocked SIGINT around this process's start (WorkerPool._spawn), and a signal mask
    # outlives exec, so a Ctrl-C to the group is held back until here; ignoring SIGINT drops it and
    # any later one until uvicorn takes it (a worker still loading printed a KeyboardInterrupt
    # traceback); unblocked, ``kill -INT`` of a serving worker stops it (it was held back for good)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    take_worker_threads(threads)
    serving: list[uvicorn.Server] = []  # the server once built, for the parent watch to stop
    threading.Thread(
        target=_stop_when_orphaned, args=(serving,), name="poolrag-parent-watch", daemon=True
    ).start()
    try:
        app, settings = build()
    except Exception as exc:
        logger.debug("worker %d could not start", os.getpid(), exc_info=True)
        report.send(" ".join(str(exc).split()) or type(exc).__name__)
        raise SystemExit(2) from None
    try:
        report.send(None)
    except BrokenPipeError:  # the parent died as this worker loaded (the parent watch says so)
        return
    config = uvicorn_config(app, settings, http, lifespan="on")
    serving.append(_WorkerServer(config, settings.drain_timeout_s))
    serving[0].run(sockets=[sock])


def _stop_when_orphaned(serving: list[uvicorn.Server]) -> None:
    """Stops the worker as its parent's stop would once the parent is gone (``kill -9``, a
    supervisor that kills the main process only): an orphaned worker served on, unsupervised, and
    beside a restarted server's workers on the same port (``SO_REUSEPORT``). A worker still loading
    exits at once: it went on loading (minutes, a GPU's memory held) to die on its ready report."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    parent.join()  # returns once the parent has exited
    logger.warning("worker %d: the parent process is gone; stopping", os.getpid())
    if serving:
        serving[0].should_exit = True
    else:  # nothing to drain, and no one to report to
        os._exit(0)


class _WorkerServer(DrainingServer):
    """A worker's server, whose stop may come twice at once: a signal sent to the whole process group
    (systemd's default ``KillMode=control-group``, dumb-init, a terminal's Ctrl-C) reaches the worker
    and its parent, which passes it on. The parent's stops (:data:`PARENT_STOP`) and the others are
    counted apart, so that the second copy does not cut the drain short (requests in flight answered
    503 at once): only a second of either kind stops the worker at once."""

    def __init__(self, config: uvicorn.Config, drain_s: float) -> None:
        super().__init__(config, drain_s)
        self._told_by_parent = self._told_from_outside = False

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            previous = signal.signal(PARENT_STOP, self._parent_stop)
            try:
                yield
            finally:
                signal.signal(PARENT_STOP, previous)

    def handle_exit(self, sig: int, frame: Any) -> None:
        first_from_outside, self._told_from_outside = not self._told_from_outside, True
        if first_from_outside and self.should_exit:  # the parent's copy came first
            return
        super().handle_exit(sig, frame)

    def _parent_stop(self, sig: int, frame: Any) -> None:
        if self._told_by_parent:
            self.force_exit = True
        self._told_by_parent = self.should_exit = True


@dataclass
class _Worker:
    sock: socket.socket
    process: BaseProcess
    report: Connection
    ready: bool = False

    def check_start(self) -> None:
        """Notes the worker's report; raises :class:`WorkerStartError` when it failed to start."""
        if not self.ready and self.report.poll():
            failure = self.report.recv()
            if failure is not None:
                raise WorkerStartError(failure)
            self.ready = True


class WorkerPool:
    """The parent of ``workers`` server processes: starts them, replaces one that dies after it
    served, and stops them all on SIGINT or SIGTERM."""

    def __init__(
        self,
        build: AppBuilder,
        workers: int,
        host: str,
        port: int,
        http: HttpOptions,
        drain_s: float,
        uds: Path | None = None,
    ):
        self.build = build
        self.threads = worker_threads(workers)
        self.http = http
        self.drain_s = drain_s
        self._context = multiprocessing.get_context("spawn")  # a fresh interpreter: no torch state forked
        self._listener = None if uds is None else UnixListener(uds)
        if self._listener is not None:  # one socket file: every worker accepts on the same socket
            self._sockets = [self._listener.sock] * workers
            self.address = f"unix:{uds}"
        else:
            if not hasattr(socket, "SO_REUSEPORT"):
                raise OSError("--workers needs SO_REUSEPORT (Linux, macOS, BSD); serve one worker here")
            first = listening_socket(host, port)
            port = first.getsockname()[1]  # port 0: the one the system chose, for every worker
            self._sockets = [first, *(listening_socket(host, port) for _ in range(workers - 1))]
            self.address = f"{host}:{port}"
        self._workers: list[_Worker] = []
        self._stopping = False
        self._signals = 0

    def _spawn(self, sock: socket.socket) -> _Worker:
        receiver, sender = self._context.Pipe(duplex=False)
        args = (self.build, sock, self.threads, self.http, sender)
        process = self._context.Process(target=_work, args=args, name="poolrag-worker")
        # the worker starts with SIGINT blocked (the mask outlives exec) until _work ignores it: a
        # terminal's Ctrl-C reaches the whole group, and the parent's stop ends a worker still
        # loading. Only blocked here, never ignored: the parent ignoring SIGINT while it started a
        # worker lost a Ctrl-C that came then (another thread took it, or the resource tracker's
        # start unblocked it), and the server went on serving
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        sender.close()  # the worker holds its end: a worker that dies unheard closes the pipe
        return _Worker(sock, process, receiver)

    def _stop(self, *_: Any) -> None:
        self._stopping = True
        self._signals += 1
        if self._signals == 2:  # a second signal: the workers answer what they hold at once
            self._tell_workers()

    def _tell_workers(self) -> None:
        """Passes the stop on to every worker: each drains its requests for ``drain_s``."""
        for worker in self._workers:
            if worker.process.is_alive() and worker.process.pid is not None:
                os.kill(worker.process.pid, PARENT_STOP)

    def run(self) -> int:
        """Serves until SIGINT or SIGTERM (then 0); raises :class:`WorkerStartError` when a worker
        cannot build its app."""
        owned_dir = None
        if MULTIPROC_DIR_VARIABLE not in os.environ:
            owned_dir = os.environ[MULTIPROC_DIR_VARIABLE] = tempfile.mkdtemp(prefix="poolrag-metrics-")
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            # started now, not by the first worker's start: its own start unblocks SIGINT on its
            # way out, which let that worker begin with SIGINT unblocked
            resource_tracker.ensure_running()
            self._workers = [self._spawn(sock) for sock in self._sockets]
            logger.info("starting %d workers, %d torch threads each", len(self._workers), self.threads)
            self._supervise()
            return 0
        finally:
            self._shut_down()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for sock in self._sockets:
                sock.close()
            if self._listener is not None:
                self._listener.close()
            if owned_dir is not None:
                shutil.rmtree(owned_dir, ignore_errors=True)
                os.environ.pop(MULTIPROC_DIR_VARIABLE, None)

    def _supervise(self) -> None:
        announced = False
        while not self._stopping:
            for index, worker in enumerate(self._workers):
                worker.check_start()
                if worker.process.is_alive():
                    continue
                worker.check_start()  # what it said before it died
                code = worker.process.exitcode or 0
                how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
                if not worker.ready:
                    raise WorkerStartError(f"worker {worker.process.pid} {how} before it served")
                logger.error("worker %d %s; starting another on its socket", worker.process.pid, how)
                _forget_metrics(worker.process.pid)
                self._workers[index] = self._spawn(worker.sock)
            if not announced and all(worker.ready for worker in self._workers):
                pids = ", ".join(str(worker.process.pid) for worker in self._workers)
                logger.info("%d workers (pids %s) serving on %s", len(self._workers), pids, self.address)
                announced = True
            time.sleep(0.2)

    def _shut_down(self) -> None:
        self._tell_workers()
        deadline = time.monotonic() + self.drain_s + STOP_GRACE_S
        for worker in self._workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.report.close()


def _forget_metrics(pid: int | None) -> None:
    """A dead worker's live gauges (queue depth, tokens in flight) leave the sums; its counters stay."""
    directory = os.environ.get(MULTIPROC_DIR_VARIABLE)
    if directory and pid is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, directory)


def serve_workers(
    build: AppBuilder,
    workers: int,
    host: str,
    port: int,
    http: HttpOptions | None = None,
    drain_s: float = 30.0,
    uds: Path | None = None,
) -> int:
    """Serve the app ``build`` makes from ``workers`` processes on ``host:port`` (or the Unix socket
    ``uds``) until interrupted, each worker draining its requests for ``drain_s``
    (``--timeout-graceful-shutdown``) when stopped; :class:`WorkerStartError` says why a worker
    could not start (the pool is stopped by then)."""
    return WorkerPool(build, workers, host, port, http or HttpOptions(), drain_s, uds).run()
