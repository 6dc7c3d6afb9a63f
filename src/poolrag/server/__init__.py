"""The HTTP server: ``poolrag serve MODEL`` (OpenAI / vLLM / Jina / Cohere-compatible).

Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client). The app is imported on first
use so that the CLI can read :mod:`poolrag.server.settings` without the extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from poolrag.server.settings import ServerSettings

if TYPE_CHECKING:
    from poolrag.server.app import create_app

__all__ = ["ServerSettings", "create_app"]


if not TYPE_CHECKING:  # a checker reads the imports above instead, so a misspelt name is an error there

    def __getattr__(name: str) -> Any:
        if name == "create_app":
            from poolrag.server.app import create_app

            return create_app
        raise AttributeError(f"module 'poolrag.server' has no attribute {name!r}")
