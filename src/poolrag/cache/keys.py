"""Cache keys: everything that decides a vector, hashed, so equal keys mean equal vectors.

The namespace covers the model (name + weights fingerprint), the task, the pooling defaults the
engine resolved, the per-call parameters and the length limit; the key adds the text. The
requested Matryoshka size is deliberately *not* part of it: the cache holds full-size vectors and
serves every smaller size from them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from poolrag.params import PoolingParams

KEY_VERSION = 1


def cache_namespace(engine: Any, task: str, params: PoolingParams) -> bytes:
    """Digest of the model and every setting that changes the vector for a given text."""
    pooler = asdict(engine.pooler_config)
    pooler.pop("dimensions", None)  # full vectors are requested explicitly; see CachedEmbedder
    description = {
        "v": KEY_VERSION,
        "model": engine.model_identity,
        "task": task,
        "pooler": pooler,
        "max_model_len": engine.max_model_len,
        "params": {
            "normalize": params.normalize,
            "input_type": params.input_type,
            "prompt": params.prompt,
            "truncate_prompt_tokens": params.truncate_prompt_tokens,
        },
    }
    return hashlib.sha256(json.dumps(description, sort_keys=True, default=str).encode()).digest()


def text_key(namespace: bytes, text: str) -> bytes:
    """32-byte content address of one text under a namespace."""
    return hashlib.sha256(namespace + b"\x00" + text.encode("utf-8", "surrogatepass")).digest()
