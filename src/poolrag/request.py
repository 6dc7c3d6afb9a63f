"""The unit of work that flows down the pipeline: tokenised input + resolved parameters."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class ResolvedParams:
    """Pooling parameters with every default filled in; hashable so identical work is done once."""

    task: str
    dimensions: int | None = None
    normalize: bool = True
    use_activation: bool = True
    input_type: str | None = None
    step_tag_id: int | None = None
    returned_token_ids: tuple[int, ...] | None = None
    max_active_dims: int | None = None


@dataclass(frozen=True, slots=True)
class Pixels:
    """An image made ready for the model: its preprocessed pixels (``[C, H, W]`` float32) and the
    digest of its decoded pixels, which is its identity (the same picture twice is computed once)."""

    digest: str
    values: Any = field(compare=False, repr=False)  # numpy array; typed loosely to keep this layer light
    patches: int = field(compare=False)  # what it costs the batch, as a text's token count does
    #: a dynamic-resolution image's (temporal, height, width) patch grid (Qwen2-VL): ``values`` is then
    #: its ``[patches, features]`` rows, as many as the grid holds
    grid: tuple[int, ...] | None = field(default=None, compare=False)
    #: an image cut into tiles (Idefics3, ModernVBERT): ``values`` is ``[tiles, C, H, W]`` and this
    #: is their ``[tiles, H, W]`` pixel mask
    tile_mask: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PoolingRequest:
    """One sequence for the model. ``attention`` is only set when some tokens must produce outputs
    without being attended to (ColBERT query expansion); ``None`` means attend to every token.
    ``truncated``: tokens of the input were cut to fit (counted, never part of the work's identity).
    ``prompt_length``: the leading tokens (the special ones before the text and the instruction
    prompt's; sentence-transformers' count) that are attended to but left out of the pool, set
    where the model's Pooling module says ``include_prompt: false``; part of the identity, since
    the same ids split otherwise between prompt and text pool differently."""

    token_ids: tuple[int, ...]
    params: ResolvedParams
    token_type_ids: tuple[int, ...] | None = None
    attention: tuple[int, ...] | None = None
    truncated: bool = field(default=False, compare=False)

    pixels: Pixels | None = None  # an image input (``token_ids`` is then empty)
    prompt_length: int = 0

    def answered(self) -> PoolingRequest:
        """This request once its result is in, kept for its output: an image's identity and patch
        count without its pixels (megabytes each), a text as it is."""
        if self.pixels is None:
            return self
        return replace(self, pixels=replace(self.pixels, values=None, tile_mask=None))

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids) if self.pixels is None else self.pixels.patches
