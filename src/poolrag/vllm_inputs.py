"""vLLM's spellings of a call's inputs, as :class:`~poolrag.Engine` takes them.

vLLM 0.32 code passes prompts as text, ``{"prompt": text}``, ``{"prompt_token_ids": ids}`` or a
bare list of ids; truncates through ``tokenization_kwargs`` (its only way since the
``truncate_prompt_tokens`` keyword went); and may give one ``PoolingParams`` per prompt.
:class:`poolrag.LLM` turns each into the Engine's one form here. What poolrag cannot honour is
refused in one line naming it, never dropped: a result that silently ignored an option would look
like vLLM's and differ from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.image_inputs import is_image_input
from poolrag.params import PoolingParams
from poolrag.prompt_inputs import PromptType, TextPrompt, TokensPrompt

__all__ = [
    "PromptType",
    "TextPrompt",
    "TokensPrompt",
    "content_part",
    "engine_prompts",
    "per_prompt_params",
    "score_side",
    "truncation",
]


#: prompt keys that only steer vLLM's prefix cache: taken, they change no result here
_CACHE_ONLY_KEYS = {"cache_salt"}

#: ``tokenization_kwargs`` values that ask for what poolrag does anyway
_ALWAYS = {
    "add_special_tokens": (True,),
    "truncation_side": ("right", None),
    "padding": (False, "do_not_pad"),
}


def _is_token_ids(value: object) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(t, int) for t in value)


def _engine_prompt(prompt: object) -> object:
    if _is_token_ids(prompt):
        return {"prompt_token_ids": list(prompt)}  # type: ignore[call-overload]
    if isinstance(prompt, list | tuple) and not prompt:
        # in a list of prompts, [] is vLLM's empty token prompt: refused as one (a ValueError), not
        # as a list where a prompt was due (a TypeError that names lists as wrong)
        return {"prompt_token_ids": []}
    if isinstance(prompt, Mapping) and "prompt_token_ids" in prompt:
        extra = sorted(set(prompt) - {"prompt_token_ids", "prompt"} - _CACHE_ONLY_KEYS)
        if extra:
            raise InvalidInputError(f"token prompt keys {extra} are not supported: poolrag pools text only")
        if "prompt" in prompt and not isinstance(prompt["prompt"], str):
            kind = type(prompt["prompt"]).__name__
            raise InputTypeError(f"a token prompt's 'prompt' (the ids' text) must be a string, not {kind}")
        # vLLM's TokensPrompt may name the text its ids came from: a label, the ids are what is pooled
        return {"prompt_token_ids": prompt["prompt_token_ids"]}
    if isinstance(prompt, Mapping) and "multi_modal_data" in prompt:
        return _image_prompt(prompt)
    if isinstance(prompt, Mapping) and "prompt" in prompt:
        extra = sorted(set(prompt) - {"prompt"} - _CACHE_ONLY_KEYS)
        if extra:
            raise InvalidInputError(f"text prompt keys {extra} are not supported: poolrag pools text only")
        if not isinstance(prompt["prompt"], str):
            kind = type(prompt["prompt"]).__name__
            raise InputTypeError(f"a text prompt's 'prompt' must be a string, not {kind}")
        return prompt["prompt"]
    if isinstance(prompt, Mapping) and "data" in prompt:
        raise InvalidInputError(
            "a 'data' prompt is for vLLM's IO processor plugins (pooling_task='plugin'), which poolrag "
            "does not run; give text or prompt_token_ids"
        )
    if isinstance(prompt, Mapping):
        raise InputTypeError(
            f"a prompt dict needs 'prompt' (text) or 'prompt_token_ids', not only {sorted(map(str, prompt))}"
        )
    return prompt  # text or a token prompt: the Engine checks it


def _image_prompt(prompt: Mapping[str, Any]) -> object:
    """vLLM's multimodal prompt, ``{"prompt": "", "multi_modal_data": {"image": image}}``, as the
    image itself: a dual encoder (CLIP) embeds a text or an image, one per prompt."""
    extra = sorted(set(prompt) - {"prompt", "multi_modal_data"} - _CACHE_ONLY_KEYS)
    data = prompt["multi_modal_data"]
    if extra or not isinstance(data, Mapping) or set(data) != {"image"}:
        keys = extra or (sorted(data) if isinstance(data, Mapping) else [type(data).__name__])
        raise InvalidInputError(f"multimodal prompts take one 'image' (multi_modal_data), not {keys}")
    if prompt.get("prompt"):
        raise InvalidInputError("a prompt is a text or an image: give the image with an empty 'prompt'")
    image = data["image"]
    if isinstance(image, list | tuple):  # vLLM's list of a prompt's images: these models read one
        if len(image) != 1:
            raise InvalidInputError("one image per prompt: pass several prompts for several images")
        (image,) = image
    return image


def score_side(data: Any) -> Any:
    """One side of vLLM's ``LLM.score`` in the Engine's form: texts as they are (a ``TextPrompt`` as
    its text), a multimodal prompt as its image, and vLLM's ``ScoreMultiModalParam``
    (``{"content": [parts]}``) as the one item its part is, a ``text`` or an ``image_url`` (a data
    URL; a remote one is never fetched). As in vLLM, one such dict is one query or document and a
    list of them is several."""
    if isinstance(data, list | tuple):
        return [_score_item(d) for d in data]
    return _score_item(data)


def _score_item(item: Any) -> Any:
    """A ``{"content": [part]}`` as its part, a multimodal prompt as its image, a ``TextPrompt``
    (``{"prompt": text}``) as its text."""
    if isinstance(item, Mapping) and "content" in item and set(item) == {"content"}:
        parts = item["content"]
        if not isinstance(parts, list | tuple) or not parts:
            raise InvalidInputError("a score's content is a list of text and image_url parts")
        if len(parts) > 1:
            raise InvalidInputError(
                f"a score item's content has {len(parts)} parts, which vLLM fuses into one input; "
                "poolrag's models read one text or one image, so give one part per item "
                '(a list of {"content": [part]} for several items)'
            )
        return _content_part(parts[0], 0)
    if isinstance(item, Mapping) and "multi_modal_data" in item:
        return _image_prompt(item)
    if isinstance(item, Mapping) and set(item) == {"prompt"}:
        return item["prompt"]
    return item


def content_part(part: object) -> tuple[str, object] | None:
    """A content part as vLLM's chat parser reads it: ``("text", its text)`` or ``("image_url", its
    URL)``, the Responses API's ``input_text`` and ``input_image`` (its ``image_url`` the URL
    itself) among them, and a part without ``type`` holding ``image_url`` (OpenAI's plain form) an
    image part; None for a part of any other kind."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type", "image_url" if "image_url" in part else None)
    if kind in ("text", "input_text"):
        return "text", part.get("text")
    if kind in ("image_url", "input_image"):
        image = part.get("image_url")
        return "image_url", image.get("url") if isinstance(image, Mapping) else image
    return None


def _content_part(part: object, index: int) -> object:
    kind, value = content_part(part) or (None, None)
    if kind == "text" and isinstance(value, str):
        return value
    if kind == "image_url":
        if isinstance(value, str) and is_image_input(value):
            return value
        raise InvalidInputError(
            f"content[{index}]: an image_url must be a data:image/...;base64, URL (nothing is fetched)"
        )
    raise InvalidInputError(f"content[{index}]: expected a text or image_url part")


def engine_prompts(prompts: Any) -> Any:
    """``prompts`` in the Engine's form: text prompts as strings, token lists as token prompts. One
    prompt stays one prompt (a bare list of ids is one, as in vLLM); anything else the Engine checks."""
    if isinstance(prompts, str | Mapping) or _is_token_ids(prompts) or is_image_input(prompts):
        return _engine_prompt(prompts)  # one prompt (bytes are an image, not a list of ids)
    if isinstance(prompts, Sequence):
        return [_engine_prompt(p) for p in prompts]
    return prompts


def truncation(
    tokenization_kwargs: Mapping[str, Any] | None, truncate_prompt_tokens: int | None
) -> int | None:
    """The ``truncate_prompt_tokens`` a call asks for: the keyword (older vLLM), or vLLM 0.32's
    ``tokenization_kwargs`` (``truncate_prompt_tokens``, or ``truncation=True`` with an optional
    ``max_length``; ``-1`` is the model's maximum). The two must agree when both are given."""
    if not tokenization_kwargs:
        return truncate_prompt_tokens
    options = dict(tokenization_kwargs)
    for name, fine in _ALWAYS.items():
        if name in options and options.pop(name) not in fine:
            raise InvalidInputError(
                f"tokenization_kwargs {name}={tokenization_kwargs[name]!r} is not supported: poolrag adds "
                "special tokens, keeps a text's first tokens and pads nothing"
            )
    wanted = options.pop("truncate_prompt_tokens", None)
    max_length = options.pop("max_length", None)
    cut = options.pop("truncation", None)
    if options:
        raise InvalidInputError(
            f"tokenization_kwargs {sorted(options)} have no counterpart here; taken: truncate_prompt_tokens, "
            f"truncation, max_length, {', '.join(_ALWAYS)}"
        )
    if cut in (True, "longest_first"):
        wanted = wanted if wanted is not None else (max_length if max_length is not None else -1)
    elif cut not in (None, False, "do_not_truncate"):
        raise InvalidInputError(f"tokenization_kwargs truncation={cut!r} is not supported (True or False)")
    elif max_length is not None:
        raise InvalidInputError(
            "tokenization_kwargs max_length cuts texts only with truncation=True; "
            "or give truncate_prompt_tokens"
        )
    if truncate_prompt_tokens is not None and wanted is not None and truncate_prompt_tokens != wanted:
        raise InvalidInputError("truncate_prompt_tokens and tokenization_kwargs disagree; give one")
    return wanted if wanted is not None else truncate_prompt_tokens


def per_prompt_params(
    pooling_params: PoolingParams | Sequence[PoolingParams] | None, count: int
) -> list[PoolingParams | None] | None:
    """One ``PoolingParams`` per prompt where vLLM's list form was given (checked for length and
    type), else None: the single value applies to every prompt."""
    if pooling_params is None or isinstance(pooling_params, PoolingParams):
        return None
    if not isinstance(pooling_params, Sequence) or isinstance(pooling_params, str):
        raise InputTypeError(
            f"pooling_params must be a PoolingParams or a list of them, not {type(pooling_params).__name__}"
        )
    given = list(pooling_params)
    for index, params in enumerate(given):
        if not isinstance(params, PoolingParams):
            kind = type(params).__name__
            raise InputTypeError(f"pooling_params[{index}] is a {kind}, not a PoolingParams")
    if len(given) != count:
        raise InvalidInputError(f"{len(given)} pooling_params for {count} prompts: one, or one per prompt")
    return list(given)
