"""Inductor's compiled artifacts for one model on one machine, kept as a file under poolrag's cache.

``torch.compiler.save_cache_artifacts`` bundles what inductor produced in this process (FX graphs,
AOT-autograd entries, generated C++ kernels); loading that bundle before compiling turns the next
start's compile into cache lookups (tracing still runs, code generation and the C++ compiler do not).
The file name is a digest of everything that makes the artifacts invalid when it changes: the
model's identity (name and weights), dtype, device, how shapes are bounded, the graph's own code
version, torch's version and the CPU's vector ISA.

A bundle is code (torch unpickles it), so it is loaded only from a file and folder this user owns
and no one else may write: a verdict (plain JSON) that chose a compiled path must not become a way
for whoever can write a shared cache folder to run code here.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from poolrag.cache_location import partial_path, poolrag_cache_dir

logger = logging.getLogger(__name__)

# bump when the compiled graphs change (native_graph / transformers_graph / opaque_ops)
GRAPH_VERSION = 1


@dataclass(frozen=True, slots=True)
class CompileKey:
    """What the artifacts were built for; any change means a different file."""

    model_identity: str
    graph: str  # which restated forward ("native-packed", "transformers-padded")
    dtype: str
    device: str
    shapes: str  # how recompiles are bounded, e.g. "dynamic T"
    torch_version: str = torch.__version__
    cpu_capability: str = ""
    graph_version: int = GRAPH_VERSION

    @staticmethod
    def for_model(
        model_identity: str, graph: str, dtype: torch.dtype, device: torch.device, shapes: str
    ) -> CompileKey:
        return CompileKey(
            model_identity=model_identity,
            graph=graph,
            dtype=str(dtype).removeprefix("torch."),
            device=device.type,
            shapes=shapes,
            cpu_capability=f"{torch.backends.cpu.get_cpu_capability()}/{platform.machine()}",
        )

    def path(self) -> Path:
        digest = hashlib.sha256(repr(self).encode()).hexdigest()[:24]
        return poolrag_cache_dir() / "compile" / f"{digest}.inductor"


def _others_could_write(path: Path) -> str | None:
    """Why ``path`` (or its folder) is not this user's alone; None when it is (or on a system
    without POSIX owners)."""
    if not hasattr(os, "getuid"):
        return None
    for item in (path, path.parent):
        info = item.stat()
        if info.st_uid not in (os.getuid(), 0):
            return f"{item} belongs to another user"
        if info.st_mode & 0o022:
            return f"{item} is writable by others"
    return None


def load_artifacts(key: CompileKey) -> bool:
    """Preload the artifacts saved for ``key``; False when there are none (or they are unreadable,
    or others could have written them)."""
    path = key.path()
    try:
        untrusted = _others_could_write(path)
        if untrusted is not None:
            message = "compile cache %s not loaded: %s, and a bundle is code; compiling from scratch"
            logger.warning(message, path, untrusted)
            return False
        blob = path.read_bytes()
    except FileNotFoundError:
        return False
    except OSError as exc:
        logger.warning("compile cache %s unreadable (%s); compiling from scratch", path, exc)
        return False
    refused = _TorchRefusals()
    torch_log = logging.getLogger("torch.compiler._cache")
    torch_log.addFilter(refused)
    try:
        loaded = torch.compiler.load_cache_artifacts(blob) is not None
    except Exception as exc:  # a bundle from another torch build: compile from scratch
        refused.said.append(repr(exc))
        loaded = False
    finally:
        torch_log.removeFilter(refused)
    if refused.said:
        said = "; ".join(refused.said)
        if loaded:  # a warning on the way, not a refusal: passed on as torch put it
            logger.warning("compile cache %s loaded; torch warned: %s", path, said)
        else:
            logger.warning("compile cache %s not loadable (%s); compiling from scratch", path, said)
    return loaded


class _TorchRefusals(logging.Filter):
    """torch's own warnings about this thread's bundle (a traceback at WARNING for a truncated or
    foreign file), kept for one line of ours that names the file."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []
        self._thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self._thread:
            return True
        error = record.exc_info[1] if record.exc_info else None
        self.said.append(record.getMessage() + (f": {error!r}" if error else ""))
        return False


def save_artifacts(key: CompileKey) -> None:
    """Write this process's inductor artifacts for ``key`` (atomically), if any; where the cache
    cannot take them, one warning: a read-only or full cache must not throw away the compiled
    forward they came from."""
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return
    path = key.path()
    partial = partial_path(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial.touch(mode=0o600, exist_ok=False)
        partial.write_bytes(saved[0])
        partial.replace(path)
    except OSError as exc:
        logger.warning("compile cache %s not saved (%s): the next start compiles again", path, exc)
        with contextlib.suppress(OSError):
            partial.unlink()
