"""vLLM's binary answer (``encoding_format`` ``bytes`` / ``bytes_only``) of ``/v1/embeddings`` and
``/pooling``: the arrays' bytes back to back (``application/octet-stream``) and, for ``bytes``, a
``metadata`` header of JSON saying where each one starts and ends, its dtype, byte order and shape
(``bytes_only`` leaves it out: the client knows the shapes). No JSON and no base64: the smallest and
fastest answer for many vectors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import numpy as np
from fastapi import Response

from poolrag.server.schemas import EmbeddingRequest, PoolingRequest
from poolrag.server.state import now
from poolrag.server.wire_dtypes import wire_bytes

BYTES_FORMATS = ("bytes", "bytes_only")

#: the answer as the OpenAPI document describes it, beside a route's JSON answer
BYTES_ANSWER_DOC: dict[str, Any] = {
    "description": "encoding_format bytes / bytes_only: the arrays' bytes back to back (bytes: a "
    "'metadata' header of JSON says where each one starts and ends, its dtype and shape)",
    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
}


def bytes_answer(
    arrays: Sequence[np.ndarray],
    body: EmbeddingRequest | PoolingRequest,
    answer_id: str,
    model: str,
    usage: dict[str, int],
) -> Response:
    """The arrays' values (flattened, row after row) in the body's ``embed_dtype`` and byte order;
    for ``bytes``, a ``metadata`` header: the answer's id, created, model and usage, and ``data``,
    one item per array."""
    chunks = [wire_bytes(array, body.embed_dtype, body.endianness) for array in arrays]
    headers = None
    if body.encoding_format == "bytes":
        ends = list(accumulate(len(chunk) for chunk in chunks))
        items = [
            {
                "index": i,
                "embed_dtype": body.embed_dtype,
                "endianness": body.endianness,
                "start": end - len(chunk),
                "end": end,
                "shape": list(np.shape(array)),
            }
            for i, (chunk, end, array) in enumerate(zip(chunks, ends, arrays, strict=True))
        ]
        metadata = {"id": answer_id, "created": now(), "model": model, "usage": usage, "data": items}
        headers = {"metadata": json.dumps(metadata, separators=(",", ":"))}
    return Response(b"".join(chunks), media_type="application/octet-stream", headers=headers)
