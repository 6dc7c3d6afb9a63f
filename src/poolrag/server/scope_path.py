"""A request's path as the app routes it: under ``--root-path`` uvicorn puts the prefix in the
ASGI ``path`` too, and the rules that match paths (public probes, metric labels) read it without."""

from __future__ import annotations

from starlette.types import Scope


def route_path(scope: Scope) -> str:
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path
