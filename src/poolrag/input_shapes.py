"""How a call's inputs become lists: one prompt or many, and score pairs 1:1, 1:N or N:N.

The in-process engine and the HTTP client take the same arguments and must refuse the same shapes
with the same words before any work starts; this is that rule, written once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.image_inputs import is_image_input

_IMAGE_FORMS = "an image (a PIL image, its encoded bytes, a pathlib.Path or a data:image URL)"


def item_list(values: Any, what: str) -> list[Any]:
    """``values`` (documents, passages, a ``text_2``) as a list; one bare string is refused, since
    listing it would score it a character at a time."""
    if isinstance(values, str):
        raise InputTypeError(f"{what} must be a list of strings, not one string", param=what)
    try:
        return list(values)
    except TypeError:
        kind = type(values).__name__
        raise InputTypeError(f"{what} must be a list of strings, not {kind}", param=what) from None


def prompt_list(prompts: Any, what: str = "input", token_prompts: bool = True) -> list[Any]:
    """``prompts`` as a list: one string, token prompt (a mapping with ``prompt_token_ids``) or image
    (:mod:`poolrag.image_inputs`) is a list of one; a sequence must hold only those
    (``token_prompts=False``: no token prompts, as a score's sides)."""
    one = isinstance(prompts, (str, Mapping)) or is_image_input(prompts)
    items = [prompts] if one else _column(prompts)
    if items is None:
        raise InputTypeError(
            f"{what} must be a string or a list of strings, not {type(prompts).__name__}", param=what
        )
    kinds = (str, Mapping) if token_prompts else str
    for i, item in enumerate(items):
        if not isinstance(item, kinds) and not is_image_input(item):
            forms = (
                f"a text, a token prompt or {_IMAGE_FORMS}" if token_prompts else f"a text or {_IMAGE_FORMS}"
            )
            raise InputTypeError(f"{what}[{i}] must be {forms}, not {_kind(item)}", param=what)
    return items


def _kind(item: Any) -> str:
    """What ``item`` is, in an error: a column's missing value as pandas and pyarrow give it (``None``,
    ``NaN``), not its type (``float`` alone does not say the row was empty)."""
    if item is None or (isinstance(item, float) and item != item):
        return f"{item} (a missing value)"
    return type(item).__name__


def _column(prompts: Any) -> list[Any] | None:
    """``prompts`` as a list when it is a sequence or a one-dimensional column (a numpy array, a
    pandas Series, a pyarrow array: what Ray Data's and pandas' batches hold, and a numpy array is
    what sentence-transformers' ``encode`` takes), with numpy and pyarrow strings as ``str``;
    ``None`` for anything else."""
    if isinstance(prompts, Sequence):
        return list(prompts)
    if hasattr(prompts, "to_pylist"):  # pyarrow Array, ChunkedArray
        return list(prompts.to_pylist())
    if getattr(prompts, "ndim", None) == 1 and hasattr(prompts, "tolist"):  # numpy array, pandas Series
        return list(prompts.tolist())
    return None


def score_pairs(text_1: str | Sequence[str], text_2: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """``text_1`` and ``text_2`` as lists of strings: one ``text_1`` goes with every ``text_2`` (1:N,
    returned as a list of one), else the lists pair up (N:N). Both empty is no pairs; one empty is
    refused. Only the shape is checked here: whether each text can be read is the engine's input
    stage's rule (:mod:`poolrag.tokenization.input_processor`)."""
    firsts = prompt_list(text_1, "text_1", token_prompts=False)
    seconds = prompt_list(text_2, "text_2", token_prompts=False)
    if not firsts or not seconds:
        if not firsts and not seconds:
            return [], []
        empty = "text_2" if firsts else "text_1"
        raise InvalidInputError(f"{empty} is empty: text_1 and text_2 must both be non-empty", param=empty)
    if len(firsts) not in (1, len(seconds)):
        raise InvalidInputError(
            f"text_1 has {len(firsts)} items and text_2 {len(seconds)}: use one query or equal-length lists"
        )
    return firsts, seconds
