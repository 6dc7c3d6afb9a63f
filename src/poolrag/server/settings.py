"""Server-side limits and identity, separate from the engine's own options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MAX_QUEUE = 256
DEFAULT_MAX_INPUTS = 2048  # OpenAI's own per-request limit for /v1/embeddings
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: 32 Mi values: ~700 MB of JSON floats (~21 bytes a value), 64 inputs of 512 tokens of bge-m3's
#: 1024-wide ColBERT vectors, 512 of 512 tokens of a 128-wide ColBERT's.
DEFAULT_MAX_ANSWER_VALUES = 32 * 1024 * 1024
#: Host names a keyless loopback server answers to (any port): a DNS-rebinding page cannot use them.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def default_served_name(model: str) -> str:
    """The name a server reports when the user names none: a hub id as given, a local folder by its
    last path component, so that no answer, header or error shows the host's filesystem."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        return folder.resolve().name or model
    return model


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
        engine_threads: worker threads for blocking work off the event loop (tokenising for
            ``/tokenize``, ``/detokenize``, first-token cuts and late chunking); TEI's
            ``tokenization_workers``.
        max_request_tokens: most token ids in one request, counted while parsing (413 beyond);
            ``None``: ``max_inputs`` times the model's maximum length.
        max_request_chars: most characters of text in one request (413 beyond); ``None``: the
            larger of ``max_body_bytes`` and eight times ``max_request_tokens``.
        max_inflight_bytes: request bodies held at once, all requests together; a request that
            would pass it gets 503 + ``Retry-After`` (one request alone is always admitted).
            ``None``: four times ``max_body_bytes``.
        max_inflight_tokens: token ids plus estimated text tokens (characters / 4, each text at most
            the model's length) of the requests admitted at once; beyond it 503 + ``Retry-After``.
            ``None``: four times ``max_request_tokens``.
        max_answer_values: most values in one ``/pooling``, ``/embed_all`` or ``/embed_sparse``
            answer (per-token data, ``token_embed`` and ``token_classify``, is a row per token; a
            sparse vector, its non-zero weights), counted once the
            model has read the inputs, before the answer is built (413 beyond).
        allowed_hosts: ``Host`` header names accepted (any port); ``("*",)`` accepts any. ``None``:
            the loopback names when the server has no API key and listens on loopback, else any.
        allowed_origins: web origins whose pages may call the server (CORS; ``("*",)``: any).
            ``None``: no CORS headers, unlike vLLM's default of any (see :mod:`poolrag.server.cors`).
        allowed_methods: methods a CORS preflight may ask for; ``None``: any, as vLLM. Only with
            ``allowed_origins``, as are the next two.
        allowed_headers: request headers a CORS preflight may ask for; ``None``: any, as vLLM.
        allow_credentials: CORS answers let browsers send cookies and HTTP authentication.
        header_timeout_s: a connection must send a request's headers within this time.
        body_timeout_s: a request's body must arrive within this time (408 otherwise).
        keep_alive_s: an idle keep-alive connection is closed after this time (put it above a
            load balancer's idle timeout, or it reuses connections the server is closing).
        drain_timeout_s: after SIGTERM / Ctrl-C, how long requests in flight may run on; those
            still waiting then are answered 503 "shutting down" (JSON; TEI's routes: Unhealthy).
        idle_trim_s: once no request has run for this long, the server gives back the memory the
            last ones left (see :mod:`poolrag.server.heap_trim`).
        calibration: a ranges file (``poolrag calibrate``) that scales int8 / uint8 vectors when a
            request brings no calibration set; ``None``: the model folder's own
            ``quantization_ranges.json`` when it ships one.
        request_id_headers: answers carry ``X-Request-Id`` (the request's own, else a fresh id), as
            vLLM's ``--enable-request-id-headers``.
        api_docs: serve ``/docs``, ``/redoc`` and ``/openapi.json`` (off: ``--disable-fastapi-docs``).
    """

    served_model_names: tuple[str, ...]
    api_key: str | None = None
    max_queue: int = DEFAULT_MAX_QUEUE
    max_inputs: int = DEFAULT_MAX_INPUTS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    retry_after_s: int = 1
    engine_threads: int = 4
    max_request_tokens: int | None = None
    max_request_chars: int | None = None
    max_inflight_bytes: int | None = None
    max_inflight_tokens: int | None = None
    max_answer_values: int = DEFAULT_MAX_ANSWER_VALUES
    allowed_hosts: tuple[str, ...] | None = None
    allowed_origins: tuple[str, ...] | None = None
    allowed_methods: tuple[str, ...] | None = None
    allowed_headers: tuple[str, ...] | None = None
    allow_credentials: bool = False
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_s: float = 5.0
    drain_timeout_s: float = 30.0
    idle_trim_s: float = 10.0
    calibration: str | None = None
    request_id_headers: bool = False
    api_docs: bool = True

    def __post_init__(self) -> None:
        if not self.served_model_names or not all(self.served_model_names):
            raise ValueError("served_model_names must hold at least one non-empty name")
        for name in (
            "max_queue",
            "max_inputs",
            "max_body_bytes",
            "max_answer_values",
            "retry_after_s",
            "engine_threads",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_request_tokens", "max_request_chars", "max_inflight_bytes", "max_inflight_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_s", "drain_timeout_s", "idle_trim_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty; leave it unset to disable authentication")
        for name in ("allowed_hosts", "allowed_origins", "allowed_methods", "allowed_headers"):
            value = getattr(self, name)
            if value is not None and not all(value):
                raise ValueError(f"{name} must not hold empty names")
        if self.allowed_origins is not None and not self.allowed_origins:
            raise ValueError("allowed_origins is empty: list the origins, or leave it unset for no CORS")
        cors = [name for name in ("allowed_methods", "allowed_headers") if getattr(self, name) is not None]
        cors += ["allow_credentials"] if self.allow_credentials else []
        if cors and self.allowed_origins is None:  # vLLM would allow every origin: say so, do not ignore
            flag = "--" + cors[0].replace("_", "-")  # the command line's name beside the field's
            raise ValueError(
                f"{cors[0]} ({flag}) needs allowed_origins (--allowed-origins): CORS answers go only to "
                "the origins listed"
            )

    @property
    def model_name(self) -> str:
        """The name reported in responses."""
        return self.served_model_names[0]


@dataclass(frozen=True, slots=True)
class Limits:
    """The per-request and in-flight limits with every default resolved for one model."""

    max_inputs: int
    max_body_bytes: int
    max_request_tokens: int
    max_request_chars: int
    max_inflight_bytes: int
    max_inflight_tokens: int
    max_answer_values: int

    @classmethod
    def resolve(cls, settings: ServerSettings, max_model_len: int) -> Limits:
        tokens = settings.max_request_tokens or settings.max_inputs * max_model_len
        return cls(
            max_inputs=settings.max_inputs,
            max_body_bytes=settings.max_body_bytes,
            max_request_tokens=tokens,
            max_request_chars=settings.max_request_chars or max(settings.max_body_bytes, 8 * tokens),
            max_inflight_bytes=settings.max_inflight_bytes or 4 * settings.max_body_bytes,
            max_inflight_tokens=settings.max_inflight_tokens or 4 * tokens,
            max_answer_values=settings.max_answer_values,
        )


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How uvicorn serves the app, as ``vllm serve``'s frontend flags set it.

    Attributes:
        log_level: uvicorn's own log level (``--uvicorn-log-level``; default ``--log-level``).
        access_log: one line per request (off: ``--disable-uvicorn-access-log``; as in vLLM,
            ``--disable-log-requests`` leaves it on).
        quiet_paths: paths whose requests leave no access line (``--disable-access-log-for-endpoints``:
            a probe every few seconds should not bury the requests).
        root_path: the path prefix a proxy serves the app under (``--root-path``).
        tls: uvicorn's ``ssl_*`` settings (``--ssl-keyfile``, ``--ssl-certfile``, ...); empty: plain HTTP.
    """

    log_level: str = "info"
    access_log: bool = True
    quiet_paths: frozenset[str] = frozenset()
    root_path: str = ""
    tls: Mapping[str, Any] = field(default_factory=dict)

    def uvicorn_kwargs(self) -> dict[str, Any]:
        return {
            "log_level": self.log_level,
            "access_log": self.access_log,
            "root_path": self.root_path,
            **self.tls,
        }
