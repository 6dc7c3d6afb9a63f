"""Token ids of a batch → the host tensors a forward pass takes, without a Python loop per row.

Two layouts:

* **padded** ``[B, W]`` rows with an attention mask (every architecture runs it);
* **packed** one ``[1, T]`` row of all tokens, positions restarting per sequence, plus the
  cumulative lengths varlen attention needs (no FLOP is spent on padding).

On CUDA the host tensors are put in pinned memory so the copy to the device is asynchronous.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import torch

from poolrag.request import PoolingRequest


@dataclass(slots=True)
class BatchInputs:
    """Model keyword arguments (host or device tensors) plus what unpadding needs afterwards."""

    kwargs: dict[str, torch.Tensor | int]
    lengths: torch.Tensor  # [B] int64
    packed: bool
    num_tokens: int
    on_device: bool = False
    keep: torch.Tensor | None = field(default=None)  # [B, W] bool, padded layout only
    # the model computes each sequence's first row only in its last layer (CLS-pooled batches)
    first_rows_only: bool = False

    def to(self, device: torch.device) -> BatchInputs:
        if self.on_device:
            return self
        moved = {
            k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
            for k, v in self.kwargs.items()
        }
        keep = self.keep.to(device, non_blocking=True) if self.keep is not None else None
        lengths = self.lengths.to(device, non_blocking=True)
        return BatchInputs(moved, lengths, self.packed, self.num_tokens, True, keep, self.first_rows_only)

    def release(self) -> None:
        """Let go of the batch's tensors, keeping its counts: after an out-of-memory error its halves
        prepare their own, and a caller still holding this object must not keep the whole batch's
        alive meanwhile (a ViT-B/32 batch's pixels are a quarter of its forward pass's peak)."""
        self.kwargs = {}
        self.keep = None


def _flat(batch: Sequence[PoolingRequest], attr: str, total: int) -> np.ndarray:
    return np.fromiter(chain.from_iterable(getattr(r, attr) for r in batch), dtype=np.int64, count=total)


def _flat_or(batch: Sequence[PoolingRequest], attr: str, total: int, fill: int) -> np.ndarray:
    """:func:`_flat` where some requests lack ``attr``: their tokens get ``fill``."""
    flat = np.full(total, fill, dtype=np.int64)
    start = 0
    for r in batch:
        if (values := getattr(r, attr)) is not None:
            flat[start : start + r.num_tokens] = values
        start += r.num_tokens
    return flat


def _pin(t: torch.Tensor, pin: bool) -> torch.Tensor:
    return t.pin_memory() if pin else t


def build_inputs(
    batch: Sequence[PoolingRequest],
    *,
    pad_token_id: int,
    with_token_types: bool,
    packed: bool,
    position_offset: int = 0,
    pin: bool = False,
) -> BatchInputs:
    lengths = np.fromiter((r.num_tokens for r in batch), dtype=np.int64, count=len(batch))
    total = int(lengths.sum())
    ids = _flat(batch, "token_ids", total)
    types: np.ndarray | None = None
    if with_token_types:
        if all(r.token_type_ids is not None for r in batch):
            types = _flat(batch, "token_type_ids", total)
        else:
            types = _flat_or(batch, "token_type_ids", total, 0)
    lengths_t = torch.from_numpy(lengths)
    if packed:
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        positions = np.arange(total, dtype=np.int64) - starts + position_offset
        cu = np.zeros(len(batch) + 1, dtype=np.int32)
        np.cumsum(lengths, out=cu[1:])
        kwargs: dict[str, torch.Tensor | int] = {
            "input_ids": _pin(torch.from_numpy(ids)[None], pin),
            "position_ids": _pin(torch.from_numpy(positions)[None], pin),
            "cu_seq_lens_q": _pin(torch.from_numpy(cu), pin),
            "cu_seq_lens_k": _pin(torch.from_numpy(cu), pin),
            "max_length_q": int(lengths.max()),
            "max_length_k": int(lengths.max()),
        }
        if types is not None:
            kwargs["token_type_ids"] = _pin(torch.from_numpy(types)[None], pin)
        return BatchInputs(kwargs, _pin(lengths_t, pin), True, total)

    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    padded_ids = np.full((len(batch), width), pad_token_id, dtype=np.int64)
    padded_ids[keep] = ids
    attention = keep.astype(np.int64)
    if any(r.attention is not None for r in batch):
        attention[keep] = _flat_or(batch, "attention", total, 1)
    kwargs = {
        "input_ids": _pin(torch.from_numpy(padded_ids), pin),
        "attention_mask": _pin(torch.from_numpy(attention), pin),
    }
    if types is not None:
        padded_types = np.zeros((len(batch), width), dtype=np.int64)
        padded_types[keep] = types
        kwargs["token_type_ids"] = _pin(torch.from_numpy(padded_types), pin)
    return BatchInputs(kwargs, _pin(lengths_t, pin), False, total, keep=_pin(torch.from_numpy(keep), pin))


def build_page_inputs(
    batch: Sequence[PoolingRequest], *, pad_token_id: int, pin: bool = False
) -> BatchInputs:
    """A page retriever's pages: their token ids (image tokens and prompt) padded as texts are, and
    their ``pixel_values`` ``[B, C, H, W]``; one output row per position."""
    types = all(r.token_type_ids is not None for r in batch)  # PaliGemma's prefix marks
    inputs = build_inputs(batch, pad_token_id=pad_token_id, with_token_types=types, packed=False, pin=pin)
    images = [r.pixels for r in batch if r.pixels is not None]
    if len(images) != len(batch):
        raise ValueError("a batch mixes images and texts")  # the engine core keeps them apart
    if images[0].grid is not None:  # each image's rows of patches, padded to the longest, and its grid
        pixels = _padded_stack([p.values for p in images])
        grids = torch.tensor([p.grid for p in images], dtype=torch.int64)
        inputs.kwargs["image_grid_thw"] = _pin(grids, pin)
    elif images[0].tile_mask is not None:  # each image's tiles, padded with all-zero tiles the model drops
        pixels = _padded_stack([p.values for p in images])
        masks = _padded_stack([p.tile_mask for p in images])
        inputs.kwargs["pixel_attention_mask"] = _pin(torch.from_numpy(masks), pin)
    else:
        pixels = np.stack([p.values for p in images])
    inputs.kwargs["pixel_values"] = _pin(torch.from_numpy(pixels), pin)
    return inputs


def _padded_stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``arrays`` stacked, each padded with zeros along its first axis to the longest."""
    out = np.zeros((len(arrays), max(len(a) for a in arrays), *arrays[0].shape[1:]), dtype=arrays[0].dtype)
    for i, array in enumerate(arrays):
        out[i, : len(array)] = array
    return out


def build_image_inputs(batch: Sequence[PoolingRequest], *, pin: bool = False) -> BatchInputs:
    """``pixel_values`` ``[B, C, H, W]`` of a batch of images (one row out per image)."""
    pixels = np.stack([r.pixels.values for r in batch if r.pixels is not None])
    if len(pixels) != len(batch):
        raise ValueError("a batch mixes images and texts")  # the engine core keeps them apart
    ones = torch.ones(len(batch), dtype=torch.int64)
    total = sum(r.num_tokens for r in batch)
    kwargs = {"pixel_values": _pin(torch.from_numpy(pixels), pin)}
    first = batch[0].pixels
    if first is not None and first.grid is not None:  # SigLIP2: each image's patch mask and grid
        masks = np.stack([r.pixels.tile_mask for r in batch if r.pixels is not None])
        kwargs["pixel_attention_mask"] = _pin(torch.from_numpy(masks), pin)
        shapes = torch.tensor([r.pixels.grid for r in batch if r.pixels is not None], dtype=torch.int64)
        kwargs["spatial_shapes"] = _pin(shapes, pin)
    return BatchInputs(kwargs, _pin(ones, pin), False, total)
