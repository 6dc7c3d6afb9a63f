"""``truncate``: the one Matryoshka cut the embedding head, the chunk join and the cache share."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from poolrag.pooling.matryoshka import truncate

RNG = np.random.default_rng(7)
BATCH = RNG.normal(size=(5, 48)).astype(np.float32)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dimensions", [None, 48, 16, 1])
def test_a_batch_is_cut_as_each_row_alone(dimensions: int | None, normalize: bool) -> None:
    batch = truncate(BATCH, dimensions, normalize)
    rows = np.stack([truncate(row, dimensions, normalize) for row in BATCH])
    np.testing.assert_array_equal(batch, rows)
    assert batch.shape == (5, dimensions or 48)


def test_the_cut_is_the_prefix_renormalised_to_unit_length() -> None:
    cut = truncate(BATCH, 16, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(cut, BATCH[:, :16] / np.linalg.norm(BATCH[:, :16], axis=1, keepdims=True))
    # a cut of an already normalised vector is the same vector (what lets one cached vector serve all sizes)
    unit = BATCH / np.linalg.norm(BATCH, axis=1, keepdims=True)
    np.testing.assert_allclose(truncate(unit, 16, normalize=True), cut, atol=1e-6)


def test_without_normalize_the_values_are_kept_as_they_are() -> None:
    cut = truncate(BATCH, 16, normalize=False)
    np.testing.assert_array_equal(cut, BATCH[:, :16])
    assert cut.flags.c_contiguous and cut.dtype == np.float32


def test_numpy_keeps_its_dtype_and_a_zero_row_stays_zero() -> None:
    rows = np.zeros((2, 8), dtype=np.float64)
    rows[1] = np.arange(8)
    cut = truncate(rows, 4, normalize=True)
    assert cut.dtype == np.float64
    np.testing.assert_array_equal(cut[0], np.zeros(4))
    assert np.isfinite(cut).all()


@pytest.mark.parametrize("dimensions", [None, 16])
def test_a_tensor_is_cut_as_the_array_and_as_torch_normalises(dimensions: int | None) -> None:
    tensor = torch.from_numpy(BATCH.copy())
    cut = truncate(tensor, dimensions, normalize=True)
    assert isinstance(cut, torch.Tensor)
    expected = F.normalize(tensor[:, : dimensions or 48], p=2, dim=-1)
    torch.testing.assert_close(cut, expected, rtol=0, atol=0)
    np.testing.assert_allclose(cut.numpy(), truncate(BATCH, dimensions, normalize=True), atol=1e-6)
