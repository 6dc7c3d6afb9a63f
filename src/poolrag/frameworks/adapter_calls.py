"""The backend calls behind both frameworks' embedding classes, with their input checks.

Each call hands the whole list to the backend at once: the engine packs forward passes by token
budget, which beats any fixed batch size chosen by an adapter. Results come back as Python lists
because both frameworks type embeddings as ``list[float]`` (Python floats hold float32 exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

from poolrag.backend import PoolingBackend
from poolrag.errors import InputTypeError
from poolrag.params import PoolingParams


def check_text(text: object, what: str = "the text") -> str:
    if not isinstance(text, str):
        raise InputTypeError(f"{what} must be a string, not {type(text).__name__}")
    return text


def check_texts(texts: object) -> list[str]:
    # A bare string would otherwise be embedded one character at a time.
    if isinstance(texts, str):
        raise InputTypeError("expected a list of strings, got one string (embed it as a query instead)")
    if not isinstance(texts, Sequence):
        raise InputTypeError(f"expected a list of strings, not {type(texts).__name__}")
    return list(texts)


def embed_texts(backend: PoolingBackend, texts: object, params: PoolingParams) -> list[list[float]]:
    """One vector per text, in order."""
    return backend.embed_array(check_texts(texts), params).tolist()


async def aembed_texts(backend: PoolingBackend, texts: object, params: PoolingParams) -> list[list[float]]:
    return (await backend.aembed_array(check_texts(texts), params)).tolist()


def embed_text(backend: PoolingBackend, text: object, params: PoolingParams) -> list[float]:
    return backend.embed_array([check_text(text)], params)[0].tolist()


async def aembed_text(backend: PoolingBackend, text: object, params: PoolingParams) -> list[float]:
    return (await backend.aembed_array([check_text(text)], params))[0].tolist()
