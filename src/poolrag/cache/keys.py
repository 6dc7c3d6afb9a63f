"""Cache keys: everything that decides a vector, hashed, so equal keys mean equal vectors.

The namespace covers the model (its weights fingerprint, which digests the config, tokenizer and
prompt files too, and the pooler settings that shape its outputs, both from
:class:`~poolrag.model_facts.ModelFacts`), the task, the per-call parameters and the length limit;
the key adds the text (or an image's digest, in a space of keys no text reaches). The model's
*name* is not part of it: ``./bge``, ``bge/``, an absolute path, a hub id and a server's served
name for the same weights share entries. The requested Matryoshka
size is deliberately not part of it either: the cache holds full-size vectors and serves every
smaller size from them. Only the facts go in, so an in-process engine and a remote server with the
same model and settings share entries. Nor is the precision: bf16, fp16 and the CPU fast modes
(each held to a cosine bar against fp32) answer for the same model, so a GPU ingest and a CPU
search share one cache; a hit equals a fresh call at the precision that first wrote it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Container, Sequence
from dataclasses import asdict
from typing import TypeVar

from poolrag.model_facts import ModelFacts, weights_fingerprint
from poolrag.params import PoolingParams

KEY_VERSION = 3  # 3: the weights fingerprint, not name@weights


def cache_namespace(facts: ModelFacts, task: str, params: PoolingParams) -> bytes:
    """Digest of the model and every setting that changes the vector for a given text."""
    per_call = asdict(params)
    per_call.pop("dimensions")  # full vectors are cached; sizes are cut on the way out
    # added later: unset, they must not move old keys
    for later in ("max_active_dims", "prompt_name", "truncate", "late_chunking_params"):
        if per_call.get(later) is None:
            per_call.pop(later, None)
    # The length rule as the vectors see it: cutting at the model's length (-1, a limit at or past
    # it, truncate=True) gives the default's vectors, as does refusing an input that fits; only an
    # explicit refusal (truncate=False) keeps keys of its own, so a cut vector never answers for it.
    limit = per_call.get("truncate_prompt_tokens")
    if limit is not None and (limit == -1 or limit >= facts.max_model_len):
        per_call["truncate_prompt_tokens"] = None
    if per_call.get("truncate") is True:
        per_call.pop("truncate")
    if task == "embed" and per_call.get("normalize") == facts.normalizes_embeddings:
        per_call["normalize"] = None  # asking for what the model does anyway: the same vectors, one key
    description = {
        "v": KEY_VERSION,
        "model": weights_fingerprint(facts.model_identity),
        "outputs": facts.output_fingerprint,
        "task": task,
        "max_model_len": facts.max_model_len,
        "params": per_call,
    }
    return hashlib.sha256(json.dumps(description, sort_keys=True, default=str).encode()).digest()


def text_key(namespace: bytes, text: str) -> bytes:
    """32-byte content address of one text under a namespace."""
    return hashlib.sha256(namespace + b"\x00" + text.encode("utf-8", "surrogatepass")).digest()


def image_key(namespace: bytes, identity: str) -> bytes:
    """32-byte content address of one image (its :func:`~poolrag.image_inputs.image_identity`)
    under a namespace. The byte after the namespace is 1 where every text key's is 0, so no text,
    whatever it spells, reaches an image's key (and text keys stay where caches wrote them)."""
    return hashlib.sha256(namespace + b"\x01" + identity.encode()).digest()


Item = TypeVar("Item")


def missing_items(
    items: Sequence[Item], keys: Sequence[bytes], found: Container[bytes]
) -> list[tuple[bytes, Item, int]]:
    """``(key, item, where)`` of each distinct item the cache did not have, ``where`` its first
    index in the caller's list: the backend sees only these, and its errors name their index among
    them, which ``where`` turns back into the caller's (:func:`~poolrag.errors.at_position`)."""
    todo: dict[bytes, tuple[Item, int]] = {}
    for i, (key, item) in enumerate(zip(keys, items, strict=True)):
        if key not in found and key not in todo:
            todo[key] = (item, i)
    return [(key, item, i) for key, (item, i) in todo.items()]
