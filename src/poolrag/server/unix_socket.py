"""A Unix domain socket to serve on (``poolrag serve --uds PATH``, vLLM's and uvicorn's ``--uds``).

A proxy on the same machine (nginx's ``proxy_pass http://unix:/run/poolrag.sock``, a sidecar)
reaches the server through a file instead of a port: no port to allocate, and only what can open
the file connects. A server killed with ``kill -9`` leaves its socket file behind, and binding
over it fails, so a socket file that nothing answers on is replaced; one a live server answers
on, or a path that is not a socket (a file, a folder: never deleted), is refused in one line naming
it. The file is made connectable by every local user (mode 0666, as uvicorn's ``--uds`` makes it:
the proxy often runs as another user); its folder's permissions decide who reaches it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

SOCKET_MODE = 0o666


def check_unix_socket_free(path: Path) -> None:
    """Raise ``OSError`` naming ``path`` when a server could not listen there: a live server answers
    on it, or something other than a socket is there. A stale socket file is left for the bind."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise OSError(errno.ENOENT, f"cannot listen on {path}: its folder does not exist") from None
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise OSError(errno.EEXIST, f"cannot listen on {path}: it exists and is not a socket")
    if _answers(path):
        raise OSError(errno.EADDRINUSE, f"cannot listen on {path}: another server is listening on it")


class UnixListener:
    """A listening socket at ``path`` (``sock``), a stale socket file there replaced; ``OSError``
    naming the path as :func:`check_unix_socket_free` says. :meth:`close` removes the file."""

    def __init__(self, path: Path) -> None:
        check_unix_socket_free(path)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.stat(path).st_mode):
                os.unlink(path)  # stale: nothing answered on it
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(str(path))
            os.chmod(path, SOCKET_MODE)
            self.sock.listen(2048)
            self._file = _identity(path)
        except OSError as exc:
            self.sock.close()
            raise OSError(exc.errno, f"cannot listen on {path}: {exc.strerror or exc}") from None

    @contextlib.contextmanager
    def closed_on_sigterm(self) -> Iterator[None]:
        """Within the block (main thread only), a SIGTERM closes this listener before it ends the
        process. uvicorn ends a stopped server by raising the signal again, once drained, under
        the handler that was there before it: the default one ended the process before any
        ``finally`` ran, and the socket file stayed behind."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def close_then_stop(signum: int, frame: FrameType | None) -> None:
            self.close()
            signal.signal(signum, previous)
            signal.raise_signal(signum)

        previous = signal.signal(signal.SIGTERM, close_then_stop)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def close(self) -> None:
        """Stop listening and remove the socket file, unless another server has bound the path since."""
        self.sock.close()
        with contextlib.suppress(OSError):
            if _identity(self.path) == self._file:
                os.unlink(self.path)


def _identity(path: Path) -> tuple[int, int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino, found.st_ctime_ns  # an inode number is reused at once


def _answers(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except OSError:  # ECONNREFUSED: a file no process listens on
        return False
    finally:
        probe.close()
    return True
