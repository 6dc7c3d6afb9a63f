"""Request bodies and response decoding for ``poolrag serve``, shared by the sync and async client.

Embeddings travel as base64 little-endian float32 so that remote vectors are bit-identical to the
engine's; per-token matrices travel as JSON numbers, which round-trip float32 exactly as well.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import numpy as np

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.image_inputs import as_data_url, is_image_input, text_only
from poolrag.model_facts import ModelFacts
from poolrag.outputs import SPARSE_ENTRY
from poolrag.params import PoolingParams

#: The PoolingParams fields each endpoint reads from a request body: every one reads how inputs are
#: cut and whether the activation applies; the vector endpoints also read the vectors' settings.
_EVERY_ENDPOINT = ("truncate_prompt_tokens", "truncate", "use_activation")
_VECTORS = (*_EVERY_ENDPOINT, "dimensions", "normalize", "input_type", "prompt", "prompt_name")
_READS = {
    "/v1/embeddings": _VECTORS,
    "/pooling": (*_VECTORS, "max_active_dims"),
    "/score": _EVERY_ENDPOINT,
    "/classify": _EVERY_ENDPOINT,
}

#: Response headers naming the served model on every answer (``poolrag.server.model_identity``):
#: ``ModelFacts.model_identity`` and ``ModelFacts.output_fingerprint``, percent-encoded (header
#: values are latin-1).
MODEL_IDENTITY_HEADER = "X-Poolrag-Model-Identity"
OUTPUT_FINGERPRINT_HEADER = "X-Poolrag-Output-Fingerprint"
#: the most of an error page quoted in an error
PAGE_CHARS = 300
_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


class RerankedDocument(NamedTuple):
    """One ``/rerank`` result: the final score ranks; ``rerank_score`` is the reranker's own (equal
    to ``score`` when the reranker's scores replace the first stage's)."""

    index: int
    score: float
    rerank_score: float


def identity_headers(facts: ModelFacts) -> dict[str, str]:
    """The identity headers a server sends for ``facts``."""
    return {
        MODEL_IDENTITY_HEADER: quote(facts.model_identity, safe="@/:._-"),
        OUTPUT_FINGERPRINT_HEADER: quote(facts.output_fingerprint, safe=""),
    }


def served_identity(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """``(model_identity, output_fingerprint)`` from a response's headers; ``None`` when the server
    sends none (a proxy that strips them, an older server)."""
    identity = headers.get(MODEL_IDENTITY_HEADER)
    fingerprint = headers.get(OUTPUT_FINGERPRINT_HEADER)
    if identity is None or fingerprint is None:
        return None
    return unquote(identity), unquote(fingerprint)


def wire_input(item: Any, reads_images: bool = True, name: str = "input") -> str | list[int]:
    """One prompt as the server accepts it: text, the token ids of a ``{"prompt_token_ids"}`` prompt,
    or an image as a data URL, for a model that reads images (a text-only one would read the URL
    as text, so the image is refused here, as the engine refuses it)."""
    if isinstance(item, str):
        return item
    if is_image_input(item):
        if not reads_images:
            raise text_only(name)
        return as_data_url(item, name)
    if isinstance(item, Mapping) and "prompt_token_ids" in item:
        return [int(t) for t in item["prompt_token_ids"]]
    kind = "None (a missing value)" if item is None else type(item).__name__
    raise InputTypeError(  # named as the engine names it (documents[1]), so the caller finds it
        f"{name} must be a text, a token prompt or an image, not {kind}", param=name.partition("[")[0]
    )


def param_fields(
    params: PoolingParams | None, endpoint: str, max_model_len: int | None = None
) -> dict[str, Any]:
    """The pooling parameters that are set, as request-body fields of ``endpoint``.

    A parameter the endpoint does not read is refused: silently dropping it would give a result
    that differs from the in-process engine's. A ``truncate_prompt_tokens`` past ``max_model_len``
    (the served model's, once known) is sent as that length: the engine cuts there, while the
    server, speaking vLLM's API, refuses it.
    """
    if params is None:
        return {}
    fields = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    fields = {name: value for name, value in fields.items() if value is not None}
    refused = sorted(set(fields) - set(_READS[endpoint]))
    if refused:
        raise InvalidInputError(f"{endpoint} does not accept {', '.join(refused)} over HTTP")
    limit = fields.get("truncate_prompt_tokens")
    if max_model_len is not None and isinstance(limit, int) and limit > max_model_len:
        fields["truncate_prompt_tokens"] = max_model_len
    return fields


def error_field(body: object, name: str) -> str | None:
    """The ``error.<name>`` string (``code``, ``param``) of an OpenAI-shaped error body, if it has one."""
    error = body.get("error") if isinstance(body, dict) else None
    value = error.get(name) if isinstance(error, dict) else None
    return value if isinstance(value, str) else None


def decode_vector(value: str | Sequence[float]) -> np.ndarray:
    """A float32 vector from a base64 string or a list of numbers."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


def _by_index(items: list[dict[str, Any]], expected: int, what: str) -> list[dict[str, Any]]:
    ordered = sorted(items, key=lambda item: int(item["index"]))
    if [int(item["index"]) for item in ordered] != list(range(expected)):
        raise ValueError(f"server returned {len(ordered)} {what} results for {expected} inputs")
    return ordered


def decode_embeddings(body: dict[str, Any], expected: int) -> list[np.ndarray]:
    return [decode_vector(item["embedding"]) for item in _by_index(body["data"], expected, "embedding")]


def decode_scores(body: dict[str, Any], expected: int) -> list[float]:
    return [float(item["score"]) for item in _by_index(body["data"], expected, "score")]


def decode_probs(body: dict[str, Any], expected: int) -> list[np.ndarray]:
    """Each input's class probabilities from ``/classify`` (float32 survives JSON exactly)."""
    return [
        np.asarray(item["probs"], dtype=np.float32) for item in _by_index(body["data"], expected, "classify")
    ]


def decode_pooling(body: dict[str, Any], expected: int, sparse: bool = False) -> list[np.ndarray]:
    """Each input's array; ``sparse`` results (``{index, value}`` objects) as the engine's
    :data:`~poolrag.outputs.SPARSE_ENTRY` records."""
    items = _by_index(body["data"], expected, "pooling")
    if sparse:
        return [decode_sparse(item["data"]) for item in items]
    return [np.asarray(item["data"], dtype=np.float32) for item in items]


def decode_sparse(entries: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """A list of ``{index, value}`` objects as a :data:`~poolrag.outputs.SPARSE_ENTRY` record array."""
    out = np.empty(len(entries), dtype=SPARSE_ENTRY)
    out["index"] = [int(e["index"]) for e in entries]
    out["value"] = [float(e["value"]) for e in entries]
    return out


def decode_rerank(body: dict[str, Any]) -> list[RerankedDocument]:
    results = []
    for item in body["results"]:
        score = float(item["relevance_score"])
        own = item.get("rerank_score")
        results.append(RerankedDocument(int(item["index"]), score, score if own is None else float(own)))
    return results


def error_message(status: int, body: Any, text: str) -> str:
    """The human message out of an OpenAI-shaped (``{"error": {...}}``) or FastAPI-shaped error body."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if body.get("message"):
            return str(body["message"])
        if "detail" in body:
            return str(body["detail"])
    return page_text(text) or f"HTTP {status}"


def page_text(text: str) -> str:
    """An error page that is not the server's JSON (a proxy's, a load balancer's) in one line: an
    HTML page by its ``<title>`` (nginx's "502 Bad Gateway"), any other text with its line breaks
    and runs of spaces collapsed."""
    title = _TITLE.search(text)
    if title is not None and title.group(1).strip():
        said = " ".join(title.group(1).split())[:PAGE_CHARS]
        return f"{said} (an HTML page: a proxy in front of the server answered?)"
    return " ".join(text.split())[:PAGE_CHARS]
