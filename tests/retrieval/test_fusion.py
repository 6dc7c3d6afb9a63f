"""Second-stage fusion: hand-computed rank and z-score mixes, permutation invariance, no NaN ever."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolrag.errors import InvalidInputError
from poolrag.retrieval.fusion import (
    ScoreNormalisation,
    SecondStage,
    descending_order,
    fuse_second_stage,
    mix_normalised_scores,
    normalise_scores,
    ranks_from_scores,
)

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def test_zscore_and_minmax_hand_computed() -> None:
    # mean 2, population std sqrt(2/3)
    np.testing.assert_allclose(normalise_scores([1.0, 2.0, 3.0]), np.array([-1, 0, 1]) / math.sqrt(2 / 3))
    np.testing.assert_allclose(normalise_scores([1.0, 2.0, 5.0], "minmax"), [0.0, 0.25, 1.0])


@pytest.mark.parametrize("method", list(ScoreNormalisation))
def test_constant_and_tiny_lists_normalise_to_zero_not_nan(method: ScoreNormalisation) -> None:
    for scores in ([3.5, 3.5, 3.5], [7.0], []):
        out = normalise_scores(scores, method)
        assert not np.isnan(out).any()
        np.testing.assert_array_equal(out, np.zeros(len(scores)))


def test_mix_hand_computed_and_weight_extremes() -> None:
    first = [0.9, 0.5, 0.1]  # z-scores: 1.2247, 0, -1.2247
    rerank = [-2.0, 4.0, 1.0]  # mean 1, std sqrt(6): -1.2247, 1.2247, 0
    z = math.sqrt(1.5)
    np.testing.assert_allclose(mix_normalised_scores(first, rerank, 0.5), [0.0, z / 2, -z / 2], atol=1e-12)
    expected = [0.75 * z - 0.25 * z, 0.25 * z, -0.75 * z]
    np.testing.assert_allclose(mix_normalised_scores(first, rerank, 0.25), expected, atol=1e-12)
    assert list(descending_order(mix_normalised_scores(first, rerank, 0.0))) == [0, 1, 2]
    assert list(descending_order(mix_normalised_scores(first, rerank, 1.0))) == [1, 2, 0]


def test_fuse_uses_scores_when_given_and_ranks_when_not() -> None:
    first = [0.9, 0.5, 0.1]
    rerank = [-2.0, 4.0, 1.0]
    np.testing.assert_allclose(fuse_second_stage(rerank, first), mix_normalised_scores(first, rerank))
    # No first-stage scores: input order is the first stage; ranks 1,2,3 vs reranker ranks 3,1,2.
    np.testing.assert_allclose(fuse_second_stage(rerank), [1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62])
    assert list(descending_order(fuse_second_stage(rerank))) == [1, 0, 2]


def test_rrf_mode_ranks_the_first_stage_by_its_scores() -> None:
    # First-stage scores out of input order: their ranks are 3, 1, 2.
    out = fuse_second_stage([0.0, 0.0, 1.0], [0.1, 0.9, 0.5], mode="rrf", rrf_k=0)
    np.testing.assert_allclose(out, [1 / 3 + 1 / 2, 1 / 1 + 1 / 3, 1 / 2 + 1 / 1])


def test_rrf_default_weight_is_the_textbook_sum_and_weight_shifts_it() -> None:
    rerank = [1.0, 3.0]
    np.testing.assert_allclose(fuse_second_stage(rerank, mode="rrf"), [1 / 61 + 1 / 62, 1 / 62 + 1 / 61])
    only_first = fuse_second_stage(rerank, mode="rrf", weight=0.0)
    assert list(descending_order(only_first)) == [0, 1]
    assert list(descending_order(fuse_second_stage(rerank, mode="rrf", weight=1.0))) == [1, 0]


def test_modes_and_weights_are_validated() -> None:
    with pytest.raises(ValueError):
        fuse_second_stage([1.0], mode="blend")
    with pytest.raises(InvalidInputError, match="weight"):
        fuse_second_stage([1.0], [1.0], weight=1.5)
    with pytest.raises(InvalidInputError, match="first-stage"):
        fuse_second_stage([1.0, 2.0], [1.0])
    with pytest.raises(InvalidInputError, match="NaN"):
        fuse_second_stage([1.0, float("nan")])
    with pytest.raises(InvalidInputError, match="k must"):
        fuse_second_stage([1.0], mode="rrf", rrf_k=-1)
    assert SecondStage("replace") is SecondStage.REPLACE


def test_ranks_from_scores_breaks_ties_by_position() -> None:
    assert list(ranks_from_scores([0.5, 0.9, 0.5, 0.1])) == [2, 1, 3, 4]


scores_and_perm = st.integers(min_value=1, max_value=25).flatmap(
    lambda n: st.tuples(
        st.lists(finite, min_size=n, max_size=n),
        st.lists(finite, min_size=n, max_size=n),
        st.permutations(list(range(n))),
    )
)


@settings(max_examples=200, deadline=None)
@given(scores_and_perm, st.floats(min_value=0.0, max_value=1.0), st.sampled_from(list(ScoreNormalisation)))
def test_mix_is_never_nan_and_permutation_equivariant(data, weight, method) -> None:
    first, rerank, perm = data
    fused = mix_normalised_scores(first, rerank, weight, method)
    assert np.isfinite(fused).all()
    permuted = mix_normalised_scores(np.asarray(first)[perm], np.asarray(rerank)[perm], weight, method)
    np.testing.assert_allclose(permuted, fused[perm], rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(scores_and_perm, st.sampled_from(list(SecondStage)))
def test_every_mode_gives_finite_scores(data, mode) -> None:
    first, rerank, _ = data
    for given_first in (first, None):
        out = fuse_second_stage(rerank, given_first, mode=mode)
        assert out.shape == (len(rerank),)
        assert np.isfinite(out).all()


@settings(max_examples=200, deadline=None)
@given(scores_and_perm)
def test_replace_keeps_the_reranker_order(data) -> None:
    first, rerank, _ = data
    out = fuse_second_stage(rerank, first, mode=SecondStage.REPLACE)
    assert list(descending_order(out)) == list(descending_order(rerank))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-1000, 1000).map(lambda i: i / 7), min_size=2, max_size=20, unique=True),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_agreeing_stages_keep_their_shared_order(scores, weight) -> None:
    """When both stages order the candidates the same way, fusion cannot reorder them."""
    for mode in (SecondStage.FUSE, SecondStage.RRF):
        fused = fuse_second_stage(scores, scores, mode=mode, weight=weight)
        np.testing.assert_array_equal(descending_order(fused), descending_order(scores))
