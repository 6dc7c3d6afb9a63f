"""Compact vectors equal sentence-transformers' ``quantize_embeddings`` on the same input."""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings

from poolrag.errors import InvalidInputError
from poolrag.postprocess.vector_precision import bucket_centres, quantize_vectors


@pytest.fixture
def vectors() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(5, 19)).astype(np.float32)


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_equals_sentence_transformers_from_the_batch_itself(vectors, precision):
    ours = quantize_vectors(vectors, precision)
    theirs = quantize_embeddings(vectors, precision)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_equals_sentence_transformers_with_a_calibration_set(vectors, precision):
    calibration = np.random.default_rng(1).normal(size=(50, 19)).astype(np.float32)
    ours = quantize_vectors(vectors[:1], precision, calibration=calibration)
    theirs = quantize_embeddings(vectors[:1], precision, calibration_embeddings=calibration)
    np.testing.assert_array_equal(ours, theirs)


def test_binary_packs_one_bit_per_dimension_big_end_first():
    row = np.array([[1.0, -1.0, 0.0, 2.0, -3.0, -3.0, -3.0, 0.5, 4.0]])
    assert quantize_vectors(row, "ubinary").tolist() == [[0b10010001, 0b10000000]]
    assert quantize_vectors(row, "binary").tolist() == [[0b10010001 - 128, 0b10000000 - 128]]


def test_float_is_float32_unchanged(vectors):
    np.testing.assert_array_equal(quantize_vectors(vectors, "float"), vectors)


def test_a_calibration_of_the_wrong_width_names_both_widths(vectors):
    with pytest.raises(
        InvalidInputError,
        match="calibration vectors have 7 dimensions, the embeddings have 19",
    ):
        quantize_vectors(vectors, "int8", calibration=np.random.default_rng(3).normal(size=(3, 7)))


def test_one_vector_without_calibration_is_refused(vectors):
    with pytest.raises(InvalidInputError, match="int8 of one vector needs fixed ranges"):
        quantize_vectors(vectors[:1], "int8")


def test_an_unknown_precision_is_refused(vectors):
    with pytest.raises(InvalidInputError, match="precision 'int4' is not one of"):
        quantize_vectors(vectors, "int4")


def test_equal_vectors_give_no_range_of_their_own(vectors):
    """The same text twice: every dimension would fall in bucket 0, so nothing is said by the
    answer; refused, pointing to the two ways to give ranges."""
    with pytest.raises(InvalidInputError, match=r"these are all equal .* send calibration vectors"):
        quantize_vectors(np.repeat(vectors[:1], 2, axis=0), "int8")


def test_a_flat_dimension_stands_for_its_one_value(vectors):
    ranges = np.vstack((vectors.min(axis=0), vectors.max(axis=0)))
    ranges[:, 3] = 0.25  # every calibration vector had 0.25 there
    buckets = quantize_vectors(vectors, "uint8", calibration=np.vstack((ranges, ranges)))
    centres = bucket_centres(buckets, ranges)
    assert (centres[:, 3] == 0.25).all()
    others = np.delete(np.arange(vectors.shape[1]), 3)
    steps = (ranges[1] - ranges[0])[others] / 255
    assert (
        np.abs(np.clip(vectors, ranges[0], ranges[1])[:, others] - centres[:, others]) <= steps / 2 + 1e-6
    ).all()


@pytest.mark.parametrize("rows", [1, 4])
def test_a_calibration_set_flat_in_every_dimension_is_refused(vectors, rows):
    """One calibration vector, or one repeated, leaves every value in one bucket (the same answer
    whatever the text): refused like a batch of equal texts."""
    with pytest.raises(InvalidInputError, match="no dimension has a range to scale by"):
        quantize_vectors(vectors, "uint8", calibration=np.repeat(vectors[:1], rows, axis=0))


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e39])
def test_a_non_finite_calibration_is_said_before_its_width(vectors, bad):
    calibration = np.random.default_rng(2).normal(size=(3, 7))
    calibration[1, 2] = bad
    with pytest.raises(InvalidInputError, match="not a finite number within float32's range"):
        quantize_vectors(vectors, "int8", calibration=calibration)


def test_edges_behave_as_quantize_embeddings_does(vectors):
    """sentence-transformers' name ``float32``, codes refused rather than quantized a second time,
    and no vectors giving an empty answer of the type asked for."""
    np.testing.assert_array_equal(quantize_vectors(vectors, "float32"), quantize_vectors(vectors, "float"))
    codes = quantize_vectors(vectors, "uint8")
    with pytest.raises(InvalidInputError, match="must be float, not uint8"):
        quantize_vectors(codes, "int8")
    dim = vectors.shape[1]
    empty = np.empty((0, dim), dtype=np.float32)
    for precision, shape, dtype in (
        ("int8", (0, dim), np.int8),
        ("uint8", (0, dim), np.uint8),
        ("binary", (0, -(-dim // 8)), np.int8),
        ("ubinary", (0, -(-dim // 8)), np.uint8),
    ):
        got = quantize_vectors(empty, precision)
        assert (got.shape, got.dtype) == (shape, dtype), precision
        if precision in ("binary", "ubinary"):
            reference = quantize_embeddings(empty, precision=precision)
            assert (reference.shape, reference.dtype) == (shape, dtype)


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_equals_sentence_transformers_with_ranges_given_as_its_array(vectors, precision):
    """``ranges`` as quantize_embeddings takes it, a (2, dim) array of minima and maxima (what its
    users keep), gives its numbers, not an AttributeError about ``for_width``."""
    calibration = np.random.default_rng(1).normal(size=(50, 19)).astype(np.float32)
    ranges = np.vstack((calibration.min(axis=0), calibration.max(axis=0)))
    ours = quantize_vectors(vectors[:1], precision, ranges=ranges)
    np.testing.assert_array_equal(ours, quantize_embeddings(vectors[:1], precision, ranges=ranges))


@pytest.mark.parametrize(
    ("ranges", "said"),
    [
        (np.zeros((2, 7)), r"ranges must be a \(2, 19\) array .* got shape \(2, 7\)"),
        (np.array([np.ones(19), np.zeros(19)]), "each minimum at most its maximum"),
        (np.array([np.zeros(19), np.full(19, np.nan)]), "finite"),
    ],
)
def test_ranges_an_array_cannot_be_are_refused_by_name(vectors, ranges, said):
    with pytest.raises(InvalidInputError, match=said):
        quantize_vectors(vectors, "int8", ranges=ranges)
