"""Attention over packed rows equals attention run sequence by sequence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from poolrag.models.packed_attention import (
    AttentionLayout,
    EqualLengthRun,
    PaddedGroup,
    RunsOrGroups,
    packed_self_attention,
    runs_or_groups,
    use_runs_or_groups,
    varlen_arguments,
)

HEADS, HEAD_DIM = 3, 8
HIDDEN = HEADS * HEAD_DIM


def _per_sequence(qkv: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    outs = []
    for rows in torch.split(qkv, lengths):
        q, k, v = rows.view(len(rows), 3, HEADS, HEAD_DIM).permute(1, 2, 0, 3)
        outs.append(F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(len(rows), HIDDEN))
    return torch.cat(outs)


RUNS = RunsOrGroups(max_runs_always=10**6)
GROUPS = RunsOrGroups(min_rows_per_run=10**6, max_runs_always=0)


@pytest.mark.parametrize(
    "lengths", [[3, 7, 1, 7], [5, 5, 5], [1], [2, 2, 4, 4, 4, 9], [30, 2, 17, 9, 40, 1, 25, 25, 3]]
)
@pytest.mark.parametrize("choice", [RUNS, GROUPS], ids=["equal-length-runs", "padded-groups"])
def test_packed_rows_attend_within_their_sequence(lengths: list[int], choice: RunsOrGroups) -> None:
    torch.manual_seed(0)
    qkv = torch.randn(sum(lengths), 3 * HIDDEN)
    layout = AttentionLayout.from_lengths(torch.tensor(lengths))
    assert layout.width == max(lengths) and layout.batch == len(lengths) and layout.rows is None
    assert (layout.splits is None) == (len(set(lengths)) == 1)  # equal lengths: one block, unpadded
    torch.testing.assert_close(
        packed_self_attention(qkv, layout, HEADS, choice), _per_sequence(qkv, lengths), rtol=0, atol=1e-6
    )
    if layout.splits is not None:  # the split asked for is the one taken
        assert (layout.splits._runs is not None, layout.splits._groups is not None) == (
            choice is RUNS,
            choice is GROUPS,
        )


def test_equal_length_runs_cover_the_rows_in_order() -> None:
    runs = EqualLengthRun.split(torch.tensor([2, 2, 4, 4, 4, 9]))
    assert runs == (EqualLengthRun(0, 2, 2), EqualLengthRun(4, 3, 4), EqualLengthRun(16, 1, 9))


def test_runs_pay_once_they_average_enough_rows() -> None:
    """Up to ``max_runs_always`` runs always take one call each; beyond that only while they average
    ``min_rows_per_run`` rows (twenty distinct lengths over 210 rows do not, twenty times as many do)."""
    choice = RunsOrGroups(min_rows_per_run=20, max_runs_always=8)
    assert choice.prefers_runs(8, 8) and not choice.prefers_runs(9, 9 * 19)
    assert not choice.prefers_runs(20, 210) and choice.prefers_runs(20, 20 * 210)
    assert RunsOrGroups(min_rows_per_run=10).prefers_runs(20, 210)


@pytest.mark.parametrize("installed", [RUNS, GROUPS], ids=["runs", "groups"])
def test_attention_takes_the_split_installed_for_its_shape(installed: RunsOrGroups) -> None:
    """What the autotuner measured for this attention shape decides; other shapes keep the default.
    Only the split taken is worked out (the other is built on first use)."""
    use_runs_or_groups(HEADS, HEAD_DIM, installed)
    assert runs_or_groups(HEADS, HEAD_DIM) == installed
    assert runs_or_groups(HEADS, 2 * HEAD_DIM) == RunsOrGroups()
    lengths = list(range(1, 41))  # 40 runs of one sequence, 20.5 rows each
    qkv = torch.randn(sum(lengths), 3 * HIDDEN, generator=torch.Generator().manual_seed(4))
    layout = AttentionLayout.from_lengths(torch.tensor(lengths))
    torch.testing.assert_close(
        packed_self_attention(qkv, layout, HEADS), _per_sequence(qkv, lengths), rtol=0, atol=1e-6
    )
    splits = layout.splits
    assert splits is not None and splits.run_count == 40
    assert (splits._runs is not None, splits._groups is not None) == (installed is RUNS, installed is GROUPS)


def test_padded_groups_pad_each_sequence_to_a_neighbour_not_to_the_longest() -> None:
    """Unsorted lengths 1..200: every group is as wide as its longest member, which is within the
    growth bound of its shortest, and every packed row gets its own slot in the padded buffer."""
    lengths = torch.randperm(200, generator=torch.Generator().manual_seed(3)) + 1
    groups, rows = PaddedGroup.split(lengths)
    padded = groups[-1].offset + groups[-1].rows
    assert sum(g.count for g in groups) == 200 and len(groups) <= 25
    assert padded <= 1.25 * int(lengths.sum()) + 4 * 200  # one block would be 200 x 200 rows
    assert rows.unique().numel() == rows.numel() == int(lengths.sum()) and int(rows.max()) < padded
    for group in groups:
        assert group.offset + group.rows <= padded
        if group.key_mask is not None:
            members = group.key_mask.sum(-1).flatten()  # each member's real length
            assert int(members.max()) == group.width
            assert group.width <= int(members.min()) * PaddedGroup.GROWTH + PaddedGroup.SLACK
    # a sequence's rows are consecutive slots from the start of its padded row
    cu = torch.cumsum(lengths, 0) - lengths
    for start, length in zip(cu.tolist(), lengths.tolist(), strict=True):
        slots = rows[start : start + length]
        assert torch.equal(slots - slots[0], torch.arange(length))


def test_a_padded_batch_masks_keys_only() -> None:
    """Masked positions still produce rows (ColBERT query expansion) but nobody attends to them."""
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 1]])
    qkv = torch.randn(8, 3 * HIDDEN)
    out = packed_self_attention(qkv, AttentionLayout.from_mask(mask), HEADS)
    for row in range(8):
        seq, keys = divmod(row, 4)[0], mask[row // 4].bool()
        block = qkv.view(2, 4, 3, HEADS, HEAD_DIM)[seq]  # [4, 3, heads, d]
        q = block[row % 4, 0]  # [heads, d]
        k, v = block[keys, 1], block[keys, 2]  # [n, heads, d]: only the attended keys
        weights = torch.softmax(torch.einsum("hd,nhd->hn", q, k) / HEAD_DIM**0.5, dim=-1)
        want = torch.einsum("hn,nhd->hd", weights, v).reshape(HIDDEN)
        torch.testing.assert_close(out[row], want, rtol=0, atol=1e-5)
    assert AttentionLayout.from_mask(torch.ones(2, 4)).key_mask is None


# the keywords of torch.nn.attention.varlen.varlen_attn in the releases poolrag meets
VARLEN_SIGNATURES = {
    "torch 2.9-2.10": frozenset({"is_causal", "return_aux"}),
    "torch 2.11": frozenset({"return_aux", "scale", "window_size"}),
    "torch 2.13": frozenset({"return_aux", "scale", "window_size", "enable_gqa", "seqused_k"}),
}


def _as_the_kernel_computes(q, k, v, kwargs: dict) -> torch.Tensor:
    """What ``varlen_attn`` does with these arguments on one sequence (SDPA stands in for it)."""
    causal = kwargs.get("is_causal", False) or kwargs.get("window_size") == (-1, 0)
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    out = F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=kwargs.get("scale"), enable_gqa=kwargs.get("enable_gqa", False)
    )
    return out.transpose(0, 1)


@pytest.mark.parametrize("release", sorted(VARLEN_SIGNATURES))
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_varlen_arguments_ask_every_release_for_the_same_attention(release: str, causal: bool) -> None:
    """A custom scale and grouped heads reach the kernel whichever keywords it takes."""
    torch.manual_seed(2)
    q, k, v = torch.randn(7, 8, 16), torch.randn(7, 2, 16), torch.randn(7, 2, 16)
    want = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=causal, scale=0.3, enable_gqa=True
    ).transpose(0, 1)
    q2, k2, v2, kwargs = varlen_arguments(VARLEN_SIGNATURES[release], q, k, v, 0.3, causal)
    assert set(kwargs) <= VARLEN_SIGNATURES[release]
    torch.testing.assert_close(_as_the_kernel_computes(q2, k2, v2, kwargs), want, rtol=0, atol=1e-5)


def test_a_varlen_layout_is_the_offsets_alone() -> None:
    """For flash varlen (CUDA) nothing but the offsets is worked out: no padded block, no mask."""
    layout = AttentionLayout.from_lengths(torch.tensor([3, 7, 1]), 7, varlen=True)
    assert layout.varlen and layout.rows is None and layout.key_mask is None and layout.splits is None
    assert layout.cu_seqlens.tolist() == [0, 3, 10, 11] and (layout.batch, layout.width) == (3, 7)
    assert not AttentionLayout.from_lengths(torch.tensor([3, 7, 1]), 7).varlen
