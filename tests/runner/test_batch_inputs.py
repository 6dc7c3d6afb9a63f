"""Input tensors built without per-row loops: padded and packed layouts."""

from __future__ import annotations

import torch

from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.runner.batch_inputs import build_inputs

PARAMS = ResolvedParams(task="embed")


def _batch() -> list[PoolingRequest]:
    return [
        PoolingRequest((101, 7, 8, 102), PARAMS, token_type_ids=(0, 0, 1, 1)),
        PoolingRequest((101, 9, 102), PARAMS, token_type_ids=(0, 0, 0)),
        PoolingRequest((101, 5, 6, 4, 3, 102), PARAMS, attention=(1, 1, 1, 1, 0, 0)),
    ]


def test_padded_layout_pads_right_and_masks_padding() -> None:
    inputs = build_inputs(_batch(), pad_token_id=0, with_token_types=True, packed=False)
    ids = inputs.kwargs["input_ids"]
    assert ids.tolist() == [
        [101, 7, 8, 102, 0, 0],
        [101, 9, 102, 0, 0, 0],
        [101, 5, 6, 4, 3, 102],
    ]
    assert inputs.kwargs["attention_mask"].tolist() == [
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],  # the request's own attention pattern (ColBERT expansion tokens)
    ]
    assert inputs.kwargs["token_type_ids"].tolist() == [
        [0, 0, 1, 1, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],  # no type ids given: zeros
    ]
    assert inputs.keep is not None and inputs.keep.sum().item() == 13
    assert inputs.lengths.tolist() == [4, 3, 6]
    assert inputs.num_tokens == 13 and not inputs.packed


def test_packed_layout_restarts_positions_and_records_sequence_bounds() -> None:
    batch = _batch()[:2]
    inputs = build_inputs(batch, pad_token_id=0, with_token_types=True, packed=True)
    assert inputs.kwargs["input_ids"].tolist() == [[101, 7, 8, 102, 101, 9, 102]]
    assert inputs.kwargs["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2]]
    assert inputs.kwargs["token_type_ids"].tolist() == [[0, 0, 1, 1, 0, 0, 0]]
    assert inputs.kwargs["cu_seq_lens_q"].tolist() == [0, 4, 7]
    assert inputs.kwargs["cu_seq_lens_q"].dtype == torch.int32
    assert inputs.kwargs["max_length_q"] == 4
    assert "attention_mask" not in inputs.kwargs


def test_packed_positions_honour_a_position_offset() -> None:
    """RoBERTa-style models number positions from padding_idx + 1."""
    inputs = build_inputs(
        _batch()[:2], pad_token_id=1, with_token_types=False, packed=True, position_offset=2
    )
    assert inputs.kwargs["position_ids"].tolist() == [[2, 3, 4, 5, 2, 3, 4]]
    assert "token_type_ids" not in inputs.kwargs


def test_moving_to_a_device_keeps_every_field() -> None:
    inputs = build_inputs(_batch(), pad_token_id=0, with_token_types=False, packed=False)
    moved = inputs.to(torch.device("cpu"))
    assert moved.on_device and moved.num_tokens == inputs.num_tokens
    assert torch.equal(moved.kwargs["input_ids"], inputs.kwargs["input_ids"])
    assert moved.to(torch.device("cpu")) is moved
