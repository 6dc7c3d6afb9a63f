"""Server-side limits and identity, separate from the engine's own options."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_QUEUE = 256
DEFAULT_MAX_INPUTS = 2048  # OpenAI's own per-request limit for /v1/embeddings
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What the HTTP layer enforces before a request reaches the engine.

    Attributes:
        served_model_names: names clients may pass as ``model``; the first is the one reported back.
        api_key: when set, every endpoint except the health check and the API docs needs
            ``Authorization: Bearer <api_key>``.
        max_queue: most requests admitted at once (waiting for or running on the engine); beyond it
            the server answers 503 with ``Retry-After`` instead of queueing without bound.
        max_inputs: most inputs (texts, token lists, documents, pairs) in one request.
        max_body_bytes: largest request body accepted; larger ones get 413 before being parsed.
        retry_after_s: the ``Retry-After`` value sent with 503 answers.
        engine_threads: worker threads for synchronous engine calls (unused once the engine has
            an async core).
    """

    served_model_names: tuple[str, ...]
    api_key: str | None = None
    max_queue: int = DEFAULT_MAX_QUEUE
    max_inputs: int = DEFAULT_MAX_INPUTS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    retry_after_s: int = 1
    engine_threads: int = 4

    def __post_init__(self) -> None:
        if not self.served_model_names or not all(self.served_model_names):
            raise ValueError("served_model_names must hold at least one non-empty name")
        for name in ("max_queue", "max_inputs", "max_body_bytes", "retry_after_s", "engine_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty; leave it unset to disable authentication")

    @property
    def model_name(self) -> str:
        """The name reported in responses."""
        return self.served_model_names[0]
