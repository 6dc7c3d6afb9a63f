"""The HTTP server: ``poolrag serve MODEL`` (OpenAI / vLLM / Jina / Cohere-compatible).

Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client).
"""

from poolrag.server.app import create_app
from poolrag.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app"]
