"""What each nox session installs and runs, read by calling the noxfile's own session functions.

noxfile.py is executed with a stand-in for the ``nox`` module (the test environments nox creates do
not have nox itself), and each session function is called with a session that records ``install``
and ``run`` calls instead of acting on them. Tests then compare the docs with what CI really does,
and a change to noxfile.py is seen here without a second copy of it.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


class _NoxStandIn(types.ModuleType):
    """``nox.session``, ``nox.parametrize`` and ``nox.options`` as the noxfile uses them: sessions are
    collected with their parameter sets, nothing else happens."""

    def __init__(self) -> None:
        super().__init__("nox")
        self.options = types.SimpleNamespace()
        self.Session = RecordedSession
        self.sessions: dict[str, Callable[..., None]] = {}

    def session(self, func: Callable[..., None] | None = None, **options: Any) -> Any:
        def register(f: Callable[..., None]) -> Callable[..., None]:
            self.sessions[options.get("name") or f.__name__] = f
            return f

        return register(func) if func is not None else register

    def parametrize(self, names: str | Sequence[str], values: Sequence[Any], ids: Any = None) -> Any:
        keys = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)

        def mark(f: Callable[..., None]) -> Callable[..., None]:
            rows = [v if isinstance(v, tuple | list) else (v,) for v in values]
            f.call_specs = [dict(zip(keys, row, strict=True)) for row in rows]  # type: ignore[attr-defined]
            f.call_ids = list(ids) if ids is not None else None  # type: ignore[attr-defined]
            return f

        return mark


@functools.cache
def _noxfile() -> _NoxStandIn:
    """noxfile.py executed against the stand-in, which then holds its sessions and options."""
    stand_in = _NoxStandIn()
    spec = importlib.util.spec_from_file_location("_poolrag_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    real = sys.modules.get("nox")
    sys.modules["nox"] = stand_in
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        if real is None:
            del sys.modules["nox"]
        else:
            sys.modules["nox"] = real
    return stand_in


@functools.cache
def sessions() -> dict[str, RecordedSession]:
    """Every session of noxfile.py (parametrized ones as ``name(key=value, ...)``), recorded."""
    recorded: dict[str, RecordedSession] = {}
    for name, func in _noxfile().sessions.items():
        for call_spec in getattr(func, "call_specs", [{}]):
            label = name + (f"({', '.join(f'{k}={v}' for k, v in call_spec.items())})" if call_spec else "")
            session = RecordedSession(label)
            func(session, **call_spec)
            recorded[label] = session
    return recorded


def default_sessions() -> list[str]:
    """``nox.options.sessions``: what a bare ``nox`` (the README's test command) runs."""
    return list(_noxfile().options.sessions)


def default_runs() -> list[str]:
    """:func:`default_sessions` with a parametrised session as each of its runs, named as ``nox -s``
    takes them (``first_hour(readme)``): what scripts/nox_lanes.py splits into two lanes."""
    runs = []
    for name in default_sessions():
        ids = getattr(_noxfile().sessions[name], "call_ids", None)
        runs += [f"{name}({run_id})" for run_id in ids] if ids else [name]
    return runs
