"""A Milvus Lite gRPC server in its own process, for tests that take the database down mid-run."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    """Start the server on 127.0.0.1:``port`` and wait until it accepts connections."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "milvus_lite",
            "server",
            "--data-dir",
            str(data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            assert proc.poll() is None, "milvus-lite server exited"
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("milvus-lite server did not start")
