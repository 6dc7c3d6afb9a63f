"""What each nox session installs and runs, read by calling the noxfile's own session functions.

Each session function is called with a session object that records ``install`` and ``run`` calls
instead of acting on them, so tests can compare the docs with what CI really does, and a change to
noxfile.py is seen here without a second copy of it.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RecordedSession:
    """The parts of ``nox.Session`` the noxfile uses; every call is recorded, none is run."""

    name: str
    posargs: list[str] = field(default_factory=list)
    installs: list[tuple[str, ...]] = field(default_factory=list)
    runs: list[tuple[str, ...]] = field(default_factory=list)
    cwd: str = "."

    def install(self, *args: str, **_: object) -> None:
        self.installs.append(args)

    def run(self, *args: str, **_: object) -> None:
        self.runs.append((self.cwd, *args))

    def chdir(self, path: str) -> None:
        self.cwd = path


@functools.cache
def sessions() -> dict[str, RecordedSession]:
    """Every session of noxfile.py (parametrized ones as ``name(key=value, ...)``), recorded."""
    import nox.registry

    spec = importlib.util.spec_from_file_location("_poolrag_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    registry = nox.registry._REGISTRY  # get() hands out copies; sessions register here
    before = dict(registry)
    registry.clear()
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        registered = dict(registry)
    finally:
        registry.clear()
        registry.update(before)  # leave nox's registry as it was
    recorded: dict[str, RecordedSession] = {}
    for name, func in registered.items():
        for call_spec in [p.call_spec for p in getattr(func.func, "parametrize", [])] or [{}]:
            label = name + (f"({', '.join(f'{k}={v}' for k, v in call_spec.items())})" if call_spec else "")
            session = RecordedSession(label)
            func.func(session, **call_spec)
            recorded[label] = session
    return recorded
