"""Bidirectional self-attention over packed rows.

The native models keep every activation as ``[T, H]`` rows of real tokens. Attention is the one
place that needs sequences: on CUDA in fp16/bf16 PyTorch's flash ``varlen_attn`` reads the packed
rows directly. On the CPU the batcher's length sorting is put to use: consecutive sequences of
equal length are already a ``[n, L, ...]`` block in the packed rows, so each such run goes to SDPA
as a view, with no padding, no mask and no copies. A batch of many distinct lengths (few tokens
each, where one call per run would cost more than it saves: :class:`RunsOrGroups`, measured per
machine) is scattered into blocks of neighbouring lengths (:class:`PaddedGroup`), each padded only
to its own longest sequence and run through SDPA with a key-padding mask: one block as wide as the
batch's longest sequence padded the short texts of a mixed corpus to 2.7x their tokens, and the
fresh pages of that block cost more than attention.
Every other device scatters the rows into one ``[B, W, ...]`` block and gathers them back.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F


@dataclass(frozen=True, slots=True)
class RunsOrGroups:
    """When a CPU batch's equal-length runs each get an SDPA call rather than its rows being copied
    into :class:`PaddedGroup` blocks.

    SDPA costs tens of microseconds a call (in every layer), copying costs per row, so runs pay once
    they average enough rows; up to ``max_runs_always`` runs always do. Where the two tie depends on
    the CPU, its thread count and the attention's shape, so the autotuner measures it for each model
    (:mod:`poolrag.core.runs_or_groups_tuning`) and :func:`use_runs_or_groups` installs the verdict
    for the process (a property of the machine, like oneDNN's choice of kernels; either way the
    outputs are the same). The default, used untuned, is the tie on a 2-vCPU Xeon for 12 heads of 32.
    """

    min_rows_per_run: int = 20
    max_runs_always: int = 8

    def prefers_runs(self, runs: int, tokens: int) -> bool:
        return runs <= max(self.max_runs_always, tokens // max(self.min_rows_per_run, 1))


_RUNS_OR_GROUPS: dict[tuple[int, int], RunsOrGroups] = {}  # (heads, head dim) -> measured choice


def use_runs_or_groups(heads: int, head_dim: int, choice: RunsOrGroups) -> None:
    """Install a measured choice for attention of this shape in this process."""
    _RUNS_OR_GROUPS[(heads, head_dim)] = choice


def runs_or_groups(heads: int, head_dim: int) -> RunsOrGroups:
    """The installed choice for this shape, else the default."""
    return _RUNS_OR_GROUPS.get((heads, head_dim), RunsOrGroups())


@dataclass(frozen=True, slots=True)
class EqualLengthRun:
    """``count`` consecutive sequences of ``length`` tokens starting at packed row ``start``."""

    start: int
    count: int
    length: int

    @staticmethod
    def split(lengths: torch.Tensor) -> tuple[EqualLengthRun, ...]:
        """The runs of equal ``lengths`` (a host tensor), in row order."""
        values, counts = torch.unique_consecutive(lengths, return_counts=True)
        runs, start = [], 0
        for length, count in zip(values.tolist(), counts.tolist(), strict=True):
            runs.append(EqualLengthRun(start, count, length))
            start += count * length
        return tuple(runs)


@dataclass(frozen=True, slots=True)
class PaddedGroup:
    """``count`` sequences of neighbouring lengths at row ``offset`` of the padded buffer, each
    padded to ``width``; ``key_mask`` (``[count, 1, 1, width]``, True = attend) None when all are full."""

    offset: int
    count: int
    width: int
    key_mask: torch.Tensor | None

    # a group takes the next (longer) sequence while its width stays within this factor of its
    # shortest sequence plus SLACK tokens: padding stays a fraction of the rows, and the number
    # of SDPA calls grows with the logarithm of the length range, not with the distinct lengths
    GROWTH = 1.25
    SLACK = 4

    @staticmethod
    def split(lengths: torch.Tensor) -> tuple[tuple[PaddedGroup, ...], torch.Tensor]:
        """Groups over the sequences taken shortest first, and each packed row's padded position."""
        order = torch.argsort(lengths, stable=True)
        ordered = lengths[order].tolist()
        groups, bases = [], [0] * len(ordered)
        offset, first = 0, 0
        while first < len(ordered):
            bound = ordered[first] * PaddedGroup.GROWTH + PaddedGroup.SLACK
            last = first
            while last + 1 < len(ordered) and ordered[last + 1] <= bound:
                last += 1
            members, width = ordered[first : last + 1], ordered[last]
            mask = None
            if members[0] != width:
                mask = (torch.arange(width)[None, :] < torch.tensor(members)[:, None])[:, None, None, :]
            groups.append(PaddedGroup(offset, len(members), width, mask))
            for rank, index in enumerate(order[first : last + 1].tolist()):
                bases[index] = offset + rank * width
            offset += len(members) * width
            first = last + 1
        starts = torch.repeat_interleave(torch.tensor(bases, dtype=torch.int64), lengths)
        cu = torch.cumsum(lengths, 0) - lengths
        within = torch.arange(int(lengths.sum())) - torch.repeat_interleave(cu, lengths)
        return tuple(groups), starts + within

    @property
    def rows(self) -> int:
        return self.count * self.width


@dataclass(slots=True)
class LengthSplits:
    """A CPU batch's sequence lengths, split into equal-length runs or padded groups on first use
    (every layer of a forward pass shares one layout, and takes the split its shape prefers)."""

    lengths: torch.Tensor  # host int64, in row order
    run_count: int
    _runs: tuple[EqualLengthRun, ...] | None = None
    _groups: tuple[tuple[PaddedGroup, ...], torch.Tensor] | None = None

    @staticmethod
    def of(lengths: torch.Tensor) -> LengthSplits:
        return LengthSplits(lengths, int(torch.unique_consecutive(lengths).numel()))

    def runs(self) -> tuple[EqualLengthRun, ...]:
        if self._runs is None:
            self._runs = EqualLengthRun.split(self.lengths)
        return self._runs

    def groups(self) -> tuple[tuple[PaddedGroup, ...], torch.Tensor]:
        """The groups and each packed row's position in their padded buffer."""
        if self._groups is None:
            self._groups = PaddedGroup.split(self.lengths)
        return self._groups


@dataclass(slots=True)
class AttentionLayout:
    """Where each packed row sits in the ``[B, W]`` block attention works on."""

    batch: int
    width: int
    cu_seqlens: torch.Tensor  # [B + 1] int32 offsets of each sequence's rows
    rows: torch.Tensor | None  # [T] positions in the flattened block; None when nothing is padded
    key_mask: torch.Tensor | None  # [B, 1, 1, W] bool, True = attend; None when nothing is masked
    splits: LengthSplits | None = None  # CPU, unequal lengths: runs or groups, nothing in one block
    varlen: bool = False  # the rows go to flash varlen attention as they are: offsets are all it needs

    @staticmethod
    def from_lengths(
        lengths: torch.Tensor, width: int | None = None, varlen: bool = False
    ) -> AttentionLayout:
        """Packed rows of sequences with these ``lengths`` (an int tensor on the rows' device).

        ``varlen`` (with ``width``): the caller's attention reads the packed rows directly (see
        :func:`pads_attention`), so nothing else is worked out, and nothing waits for the device.
        """
        lengths = lengths.to(torch.int64)
        batch = int(lengths.numel())
        cu = torch.zeros(batch + 1, dtype=torch.int32, device=lengths.device)
        torch.cumsum(lengths, 0, out=cu[1:])
        if varlen and width is not None:
            return AttentionLayout(batch, width, cu, None, None, varlen=True)
        if width is None:
            width = int(lengths.max())
        if bool((lengths == width).all()):
            return AttentionLayout(batch, width, cu, None, None)
        if lengths.device.type == "cpu":
            return AttentionLayout(batch, width, cu, None, None, LengthSplits.of(lengths))
        columns = torch.arange(width, device=lengths.device)
        keep = columns[None, :] < lengths[:, None]  # [B, W]
        rows = keep.reshape(-1).nonzero().squeeze(1)
        return AttentionLayout(batch, width, cu, rows, keep[:, None, None, :])

    @staticmethod
    def from_mask(attention_mask: torch.Tensor) -> AttentionLayout:
        """A padded ``[B, W]`` batch run row for row (every position a row), masked by ``attention_mask``."""
        batch, width = attention_mask.shape
        keep = attention_mask.bool()
        cu = torch.arange(0, (batch + 1) * width, width, dtype=torch.int32, device=keep.device)
        key_mask = None if bool(keep.all()) else keep[:, None, None, :]
        return AttentionLayout(batch, width, cu, None, key_mask)

    @property
    def varlen_ok(self) -> bool:
        """Packed rows with no mask beyond the sequence boundaries (what ``varlen_attn`` expresses)."""
        return self.key_mask is None or self.rows is not None


@cache
def cuda_varlen_available(device_index: int) -> bool:
    """PyTorch ships ``varlen_attn`` and the GPU runs flash attention (compute capability ≥ 8.0)."""
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.get_device_capability(device_index) >= (8, 0)


def pads_attention(device: torch.device, dtype: torch.dtype) -> bool:
    """False only where packed rows go to the varlen kernel as they are (CUDA, fp16/bf16)."""
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return True
    return not cuda_varlen_available(device.index or 0)


def pads_to_longest(device: torch.device, dtype: torch.dtype) -> bool:
    """Attention pads every sequence of a packed batch to the batch's longest (one block): not on
    the CPU (runs of equal length, or groups of neighbouring lengths) nor in the varlen kernel."""
    return device.type != "cpu" and pads_attention(device, dtype)


def cuda_varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu: torch.Tensor,
    max_len: int,
    scale: float | None,
    causal: bool = False,
) -> torch.Tensor:
    """PyTorch's flash varlen kernel on ``[T, heads, d]`` rows (CUDA, fp16/bf16).

    ``varlen_attn`` is young and its keywords changed between releases (2.9–2.10: ``is_causal``
    only; later: ``scale``, ``window_size``, then ``enable_gqa``), so what the installed one lacks
    is done here: a custom scale folded into the queries, grouped key/value heads repeated.
    """
    from torch.nn.attention.varlen import varlen_attn

    q, k, v, kwargs = varlen_arguments(_varlen_keywords(), q, k, v, scale, causal)
    cu32 = cu.to(torch.int32)
    return varlen_attn(q, k, v, cu32, cu32, max_len, max_len, **kwargs)


def varlen_arguments(
    accepted: frozenset[str],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, object]]:
    """Query/key/value and keywords for a ``varlen_attn`` that takes the keywords ``accepted``."""
    kwargs: dict[str, object] = {}
    if "window_size" in accepted:
        kwargs["window_size"] = (-1, 0) if causal else (-1, -1)
    elif causal:
        kwargs["is_causal"] = True
    if scale is not None:
        if "scale" in accepted:
            kwargs["scale"] = scale
        else:  # the kernel multiplies by 1/sqrt(d)
            q = q * (scale * q.shape[-1] ** 0.5)
    if k.shape[1] != q.shape[1]:
        if "enable_gqa" in accepted:
            kwargs["enable_gqa"] = True
        else:
            group = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return q, k, v, kwargs


@cache
def _varlen_keywords() -> frozenset[str]:
    from torch.nn.attention.varlen import varlen_attn

    return frozenset(inspect.signature(varlen_attn).parameters)


def packed_self_attention(
    qkv: torch.Tensor, layout: AttentionLayout, heads: int, choice: RunsOrGroups | None = None
) -> torch.Tensor:
    """``[T, 3H]`` fused query/key/value rows → ``[T, H]`` attention output rows; on the CPU
    ``choice`` (default: the one installed for this shape) picks runs or padded groups."""
    rows, width3 = qkv.shape
    hidden = width3 // 3
    head_dim = hidden // heads
    if layout.varlen or (layout.varlen_ok and not pads_attention(qkv.device, qkv.dtype)):
        q, k, v = qkv.view(rows, 3, heads, head_dim).unbind(1)
        out = cuda_varlen_attention(q, k, v, layout.cu_seqlens, layout.width, None)
        return out.reshape(rows, hidden)
    if (splits := layout.splits) is not None:
        choice = choice or runs_or_groups(heads, head_dim)
        if choice.prefers_runs(splits.run_count, rows):
            return _attend_runs(qkv, splits.runs(), heads, head_dim)
        return _attend_groups(qkv, *splits.groups(), heads, head_dim)
    block = qkv
    if layout.rows is not None:
        block = qkv.new_zeros(layout.batch * layout.width, width3)
        block.index_copy_(0, layout.rows, qkv)
    q, k, v = block.view(layout.batch, layout.width, 3, heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=layout.key_mask)  # [B, heads, W, d]
    out = out.transpose(1, 2).reshape(layout.batch * layout.width, hidden)
    return out if layout.rows is None else out.index_select(0, layout.rows)


def _attend_runs(
    qkv: torch.Tensor, runs: tuple[EqualLengthRun, ...], heads: int, head_dim: int
) -> torch.Tensor:
    """Each run of equal-length sequences through SDPA as a view of the packed rows."""
    out = qkv.new_empty(qkv.shape[0], heads * head_dim)
    for run in runs:
        _attend_block(qkv, out, run.start, run.count, run.length, None, heads)
    return out


def _attend_groups(
    qkv: torch.Tensor, groups: tuple[PaddedGroup, ...], rows: torch.Tensor, heads: int, head_dim: int
) -> torch.Tensor:
    """The rows scattered to ``rows`` of their :class:`PaddedGroup` blocks, one masked SDPA call per group."""
    padded = groups[-1].offset + groups[-1].rows
    block = qkv.new_zeros(padded, qkv.shape[1])  # zeros: masked keys and values stay finite
    block.index_copy_(0, rows, qkv)
    out = qkv.new_empty(padded, heads * head_dim)
    for group in groups:
        _attend_block(block, out, group.offset, group.count, group.width, group.key_mask, heads)
    return out.index_select(0, rows)


def _attend_block(
    qkv: torch.Tensor,
    out: torch.Tensor,
    start: int,
    count: int,
    width: int,
    key_mask: torch.Tensor | None,
    heads: int,
) -> None:
    """SDPA over ``count`` sequences of ``width`` rows from row ``start`` of ``qkv`` (a view, no
    copy), written to the same rows of ``out``."""
    rows = slice(start, start + count * width)
    view = qkv[rows].view(count, width, 3, heads, -1)
    q, k, v = view.permute(2, 0, 3, 1, 4).unbind(0)  # [count, heads, width, d] each
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
    out[rows].view(count, width, heads, -1).copy_(attended.transpose(1, 2))
