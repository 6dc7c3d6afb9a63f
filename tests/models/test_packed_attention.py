"""Attention over packed rows equals attention run sequence by sequence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from poolrag.models.packed_attention import (
    AttentionLayout,
    EqualLengthRun,
    packed_self_attention,
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


@pytest.mark.parametrize("lengths", [[3, 7, 1, 7], [5, 5, 5], [1], [2, 2, 4, 4, 4, 9]])
@pytest.mark.parametrize("by_runs", [True, False], ids=["equal-length-runs", "padded-block"])
def test_packed_rows_attend_within_their_sequence(
    lengths: list[int], by_runs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not by_runs:  # too many runs for their size: the rows go through the padded block
        monkeypatch.setattr(EqualLengthRun, "MAX_RUNS_ALWAYS", 0)
    torch.manual_seed(0)
    qkv = torch.randn(sum(lengths), 3 * HIDDEN)
    layout = AttentionLayout.from_lengths(torch.tensor(lengths))
    assert layout.width == max(lengths) and layout.batch == len(lengths)
    uniform = len(set(lengths)) == 1
    assert (layout.runs is not None) == (by_runs and not uniform)
    assert (layout.rows is None) == (by_runs or uniform)
    torch.testing.assert_close(
        packed_self_attention(qkv, layout, HEADS), _per_sequence(qkv, lengths), rtol=0, atol=1e-6
    )


def test_equal_length_runs_cover_the_rows_in_order() -> None:
    runs = EqualLengthRun.split(torch.tensor([2, 2, 4, 4, 4, 9]))
    assert runs == (EqualLengthRun(0, 2, 2), EqualLengthRun(4, 3, 4), EqualLengthRun(16, 1, 9))


def test_many_short_runs_fall_back_to_the_padded_block() -> None:
    """Twenty distinct lengths over 210 rows: one call per run would cost more than the padding."""
    assert EqualLengthRun.split(torch.arange(1, 21)) is None
    assert EqualLengthRun.split(torch.arange(1, 21).repeat_interleave(20)) is not None


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
    assert layout.varlen and layout.rows is None and layout.key_mask is None and layout.runs is None
    assert layout.cu_seqlens.tolist() == [0, 3, 10, 11] and (layout.batch, layout.width) == (3, 7)
    assert not AttentionLayout.from_lengths(torch.tensor([3, 7, 1]), 7).varlen
