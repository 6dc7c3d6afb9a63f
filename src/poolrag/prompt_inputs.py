"""What one input to a task method may be, as types: a text, a token prompt or an image.

Types only, in one place, so the engine, vLLM's front door and the HTTP client name the same inputs
and a type checker accepts what the engine reads: ``engine.embed_array([Path("cat.jpg"), "a cat"])``
type-checks because it runs. Which value *is* an image at run time is :mod:`poolrag.image_inputs`'s rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, NotRequired, Protocol, TypedDict

import numpy as np


class PILImage(Protocol):
    """A Pillow image, known by its shape: Pillow is an extra, so its class cannot be named here."""

    @property
    def size(self) -> tuple[int, int]: ...

    @property
    def mode(self) -> str: ...


#: An image input besides a ``data:image/...`` URL (a ``str``): encoded bytes, a file path, a PIL image.
ImageInput = PILImage | bytes | bytearray | memoryview | PurePath


class TextPrompt(TypedDict):
    """vLLM's text prompt (``from vllm import TextPrompt``): a dict, so ``{"prompt": ...}`` is one."""

    prompt: str
    multi_modal_data: NotRequired[Mapping[str, Any]]
    cache_salt: NotRequired[str]


class TokensPrompt(TypedDict):
    """vLLM's token prompt: ids the model's own tokenizer made (its special tokens included)."""

    prompt_token_ids: list[int]
    prompt: NotRequired[str]  # the text the ids came from, if known: a label, the ids are pooled
    cache_salt: NotRequired[str]


#: A batch's column of inputs as Ray Data's ``numpy`` batches hold it, one-dimensional (a pandas
#: Series or a pyarrow array is read too, unnamed here: neither is a dependency).
Column = np.ndarray[Any, Any]

#: What vLLM's calls (:class:`poolrag.LLM`) take as one prompt.
PromptType = str | TextPrompt | TokensPrompt
#: vLLM's calls' ``prompts``: one prompt, several, or one bare list of token ids.
LLMPrompts = PromptType | Sequence[PromptType] | Sequence[int] | Column

#: What :class:`poolrag.Engine`'s task methods take as one input.
PromptInput = str | TokensPrompt | ImageInput
#: One input or several (a ``str`` is always one).
Prompts = PromptInput | Sequence[PromptInput] | Column

#: One side of a score (a query or a document): a text, or an image for a model that reads them.
ScoreInput = str | ImageInput
#: ``score``'s ``text_1`` / ``text_2``: one item or several (1:1, 1:N, N:N).
ScoreSide = ScoreInput | Sequence[ScoreInput] | Column
#: vLLM's ``LLM.score`` sides: the above, a ``TextPrompt``, or its ``{"content": [parts]}`` form.
LLMScoreSide = ScoreSide | TextPrompt | Sequence[ScoreInput | TextPrompt] | Mapping[str, Any]
