"""The backend calls behind both frameworks' embedding classes, with their argument-type checks.

Each call hands the whole list to the backend at once: the engine packs forward passes by token
budget, which beats any fixed batch size chosen by an adapter. Only when a progress bar is asked
for (``HuggingFaceEmbeddings(show_progress=True)``'s counterpart) is the list sent in pieces of
:data:`PROGRESS_PIECE` texts, so that the bar advances as each piece comes back. Results come back
as Python lists because both frameworks type embeddings as ``list[float]`` (Python floats hold
float32 exactly).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
from tqdm.auto import tqdm

from poolrag.backend import PoolingBackend
from poolrag.errors import InputTypeError, InvalidInputError, at_position
from poolrag.image_inputs import is_image_input
from poolrag.params import PoolingParams
from poolrag.text_validity import check_texts


def require_string(text: object, what: str = "the text") -> str:
    """``text`` if it is a string (whether a model can read it is the engine's check)."""
    if not isinstance(text, str):
        raise InputTypeError(f"{what} must be a string, not {type(text).__name__}")
    return text


def require_list(texts: object, one_string: str = "embed it as a query instead") -> list[str]:
    """``texts`` as a list, refusing a bare string (it would be embedded one character at a time),
    with ``one_string`` saying what to do instead. Any other iterable (a generator, a tuple) is taken
    as ``HuggingFaceEmbeddings`` takes it; a mapping, whose keys only would be read, is not."""
    if isinstance(texts, str):
        raise InputTypeError(f"expected a list of strings, got one string ({one_string})")
    if not isinstance(texts, Iterable) or isinstance(texts, Mapping):
        raise InputTypeError(f"expected a list of strings, not {type(texts).__name__}")
    return list(texts)


def check_text_list(texts: object, what: str = "input") -> list[str]:
    """Every text of a framework's whole list, checked before the framework cuts it into batches
    (LlamaIndex's ``embed_batch_size`` slices): a bad text is named where the caller's list has it
    (``input[300] is empty``), not where its slice does (``input[44]``), and a bare string is refused
    rather than embedded one character at a time."""
    return check_texts(require_list(texts, "use get_text_embedding for one text"), what)


#: Texts per backend call while a progress bar shows: a few forward passes' worth at the CPU token
#: budget, so the engine still packs well, and a bar that moves several times a thousand texts.
PROGRESS_PIECE = 128


def progress_bar(total: int) -> tqdm:
    """The bar an embedding call with progress draws: on stderr (a widget in a notebook), in texts,
    redrawn at every piece (pieces are few and each takes a forward pass or more)."""
    return tqdm(total=total, desc="Embedding", unit="text", dynamic_ncols=True, mininterval=0, miniters=1)


def _in_pieces(
    embed: Callable[[list[Any]], np.ndarray], items: list[Any], size: int, bar: tqdm | None = None
) -> list[list[float]]:
    """``embed`` over ``items`` ``size`` at a time, rows in order; an input the backend refuses is
    named where ``items`` has it, not where its piece does."""
    rows = []
    for start in range(0, len(items), size):
        piece = items[start : start + size]
        try:
            rows.append(embed(piece))
        except InvalidInputError as exc:
            raise at_position(exc, range(start, start + len(piece))) from None
        if bar is not None:
            bar.update(len(piece))
    return np.concatenate(rows).tolist() if rows else []


async def _ain_pieces(
    embed: Callable[[list[Any]], Awaitable[np.ndarray]], items: list[Any], size: int, bar: tqdm | None = None
) -> list[list[float]]:
    rows = []
    for start in range(0, len(items), size):
        piece = items[start : start + size]
        try:
            rows.append(await embed(piece))
        except InvalidInputError as exc:
            raise at_position(exc, range(start, start + len(piece))) from None
        if bar is not None:
            bar.update(len(piece))
    return np.concatenate(rows).tolist() if rows else []


def embed_texts(
    backend: PoolingBackend, texts: object, params: PoolingParams, *, progress: bool = False
) -> list[list[float]]:
    """One vector per text, in order; with ``progress``, a bar that advances as pieces come back."""
    texts = require_list(texts)
    if not progress or not texts:
        return backend.embed_array(texts, params).tolist()
    with progress_bar(len(texts)) as bar:
        return _in_pieces(lambda piece: backend.embed_array(piece, params), texts, PROGRESS_PIECE, bar)


async def aembed_texts(
    backend: PoolingBackend, texts: object, params: PoolingParams, *, progress: bool = False
) -> list[list[float]]:
    texts = require_list(texts)
    if not progress or not texts:
        return (await backend.aembed_array(texts, params)).tolist()
    with progress_bar(len(texts)) as bar:
        return await _ain_pieces(
            lambda piece: backend.aembed_array(piece, params), texts, PROGRESS_PIECE, bar
        )


def image_files(uris: object) -> list[Path | str | bytes]:
    """``uris`` (``OpenCLIPEmbeddings.embed_image``'s local paths, ``file://`` URIs or data URLs;
    LlamaIndex's paths or ``BytesIO``) as the engine's image inputs; a remote URL is refused, never
    fetched."""
    found: list[Path | str | bytes] = []
    for uri in require_list(uris, "pass a list of image paths or URIs, even for one image"):
        if callable(getattr(uri, "getvalue", None)):  # an in-memory file (BytesIO)
            uri = uri.getvalue()
        if isinstance(uri, (bytes, bytearray, Path)):
            found.append(bytes(uri) if isinstance(uri, bytearray) else uri)
            continue
        uri = require_string(uri, "an image URI")
        if is_image_input(uri):  # a data URL
            found.append(uri)
        elif uri.startswith("file://"):
            found.append(Path(unquote(urlparse(uri).path)))
        elif "://" in uri:
            raise InvalidInputError(
                f"poolrag reads local images only and never fetches {uri!r}; download it first"
            )
        else:
            found.append(Path(uri))
    return found


#: Images per backend call: their prepared pixels stay in memory until the call's forward passes
#: (600 KB each at 224 px), so a store's ``add_images`` of thousands is sent in slices.
IMAGE_PIECE = 64


def _checked_images(backend: PoolingBackend, uris: object) -> list[Path | str | bytes]:
    images = image_files(uris)
    if images and not backend.facts.reads_images:
        name = backend.facts.model_name
        raise InputTypeError(f"{name} reads text only, not images (a CLIP or SigLIP folder reads both)")
    return images


def embed_images(backend: PoolingBackend, uris: object, params: PoolingParams) -> list[list[float]]:
    """One vector per image, in the text vectors' space (a dual encoder such as CLIP)."""
    images = _checked_images(backend, uris)
    return _in_pieces(lambda piece: backend.embed_array(piece, params), images, IMAGE_PIECE)


async def aembed_images(backend: PoolingBackend, uris: object, params: PoolingParams) -> list[list[float]]:
    images = _checked_images(backend, uris)
    return await _ain_pieces(lambda piece: backend.aembed_array(piece, params), images, IMAGE_PIECE)


def embed_text(backend: PoolingBackend, text: object, params: PoolingParams) -> list[float]:
    return backend.embed_array([require_string(text)], params)[0].tolist()


async def aembed_text(backend: PoolingBackend, text: object, params: PoolingParams) -> list[float]:
    return (await backend.aembed_array([require_string(text)], params))[0].tolist()
