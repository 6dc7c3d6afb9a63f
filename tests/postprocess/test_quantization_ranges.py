"""A ranges file fixes each dimension's int8/uint8 scale once: the same vector gets the same bytes alone
or in any batch, equal to sentence-transformers' ``quantize_embeddings`` given those ranges, and a
file that is not what it claims is one error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings

from poolrag.errors import InvalidInputError
from poolrag.postprocess.quantization_ranges import RANGES_FILE, QuantizationRanges, shipped_ranges
from poolrag.postprocess.vector_precision import quantize_vectors


@pytest.fixture
def calibration() -> dict[int, np.ndarray]:
    rng = np.random.default_rng(3)
    return {19: rng.normal(size=(40, 19)).astype(np.float32), 8: rng.normal(size=(40, 8)).astype(np.float32)}


@pytest.fixture
def saved(tmp_path: Path, calibration: dict[int, np.ndarray]) -> Path:
    return QuantizationRanges.from_vectors(calibration, "tiny@abc").save(tmp_path / "ranges.json")


def test_a_saved_file_reads_back_the_min_and_max_of_each_width(saved: Path, calibration) -> None:
    ranges = QuantizationRanges.load(saved)
    assert ranges.model == "tiny@abc"
    assert sorted(ranges.by_width) == [8, 19]
    for width, rows in calibration.items():
        np.testing.assert_array_equal(ranges.for_width(width), np.vstack((rows.min(0), rows.max(0))))


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_one_vector_equals_sentence_transformers_with_the_same_ranges(saved: Path, precision: str) -> None:
    ranges = QuantizationRanges.load(saved)
    vector = np.random.default_rng(9).normal(size=(1, 19)).astype(np.float32)
    ours = quantize_vectors(vector, precision, ranges=ranges)
    theirs = quantize_embeddings(vector, precision, ranges=ranges.for_width(19))
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_a_vector_gets_the_same_bytes_alone_and_in_a_batch(saved: Path) -> None:
    ranges = QuantizationRanges.load(saved)
    batch = np.random.default_rng(5).normal(size=(6, 19)).astype(np.float32)
    alone = quantize_vectors(batch[2:3], "int8", ranges=ranges)
    np.testing.assert_array_equal(quantize_vectors(batch, "int8", ranges=ranges)[2:3], alone)
    # without fixed ranges the batch sets the scale, and the same vector's bytes change with it
    assert not np.array_equal(quantize_vectors(batch, "int8")[2:3], quantize_vectors(batch[:3], "int8")[2:3])


def test_a_width_the_file_lacks_is_refused_naming_the_widths_it_has(saved: Path) -> None:
    ranges = QuantizationRanges.load(saved)
    with pytest.raises(InvalidInputError, match=r"for 8, 19 dimensions, not 12; .*--dimensions 12"):
        quantize_vectors(np.ones((1, 12), dtype=np.float32), "int8", ranges=ranges)


def test_a_request_calibration_set_wins_over_the_file(saved: Path) -> None:
    ranges = QuantizationRanges.load(saved)
    vector = np.random.default_rng(2).normal(size=(1, 19)).astype(np.float32)
    own = np.random.default_rng(4).normal(size=(10, 19)).astype(np.float32) * 3
    np.testing.assert_array_equal(
        quantize_vectors(vector, "int8", calibration=own, ranges=ranges),
        quantize_vectors(vector, "int8", calibration=own),
    )


def _valid(saved: Path) -> dict:
    return json.loads(saved.read_text())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: "not json {", "not JSON"),
        (lambda doc: {**doc, "format": "something-else"}, "not a quantization ranges file"),
        (lambda doc: {**doc, "version": 9}, "version 9"),
        (lambda doc: {**doc, "ranges": {}}, "'ranges' must map widths"),
        (lambda doc: {**doc, "ranges": {"-3": doc["ranges"]["8"]}}, "width '-3'"),
        (lambda doc: {**doc, "ranges": {"8": {**doc["ranges"]["8"], "min": [0.0] * 7}}}, "'min' must be 8"),
        (lambda doc: {**doc, "ranges": {"8": {**doc["ranges"]["8"], "max": [True] * 8}}}, "'max' must be 8"),
        (lambda doc: {**doc, "ranges": {"8": {"min": [1.0] * 8, "max": [0.0] * 8}}}, "minimum above"),
        (lambda doc: {**doc, "model": 5}, "'model' must be a string"),
    ],
)
def test_a_file_that_is_not_valid_ranges_is_one_error_naming_it(saved: Path, change, message: str) -> None:
    document = change(_valid(saved))
    saved.write_text(document if isinstance(document, str) else json.dumps(document))
    with pytest.raises(InvalidInputError, match=message) as caught:
        QuantizationRanges.load(saved)
    assert str(saved) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_number_is_refused(saved: Path, value: float) -> None:
    document = _valid(saved)
    document["ranges"]["8"]["min"][0] = value
    saved.write_text(json.dumps(document))  # Python's json writes NaN / Infinity
    with pytest.raises(InvalidInputError, match="'min' must be 8 finite numbers"):
        QuantizationRanges.load(saved)


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"nothing\.json: No such file"):
        QuantizationRanges.load(tmp_path / "nothing.json")


def test_a_model_folder_ships_its_ranges_by_a_fixed_name(tmp_path: Path, saved: Path) -> None:
    assert shipped_ranges(tmp_path / "no-ranges-here") is None
    folder = tmp_path / "model"
    folder.mkdir()
    assert shipped_ranges(folder) is None
    (folder / RANGES_FILE).write_text(saved.read_text())
    shipped = shipped_ranges(folder)
    assert shipped is not None and sorted(shipped.by_width) == [8, 19]
    assert shipped.source == str(folder / RANGES_FILE)


def test_a_model_checks_the_ranges_it_is_given(caplog: pytest.LogCaptureFixture) -> None:
    """Ranges no width of the model can use are refused, naming both; ranges measured on other
    weights are used with a warning (any model of the width may use them, at a cost)."""
    from poolrag.model_facts import ModelFacts, ScoreKind

    facts = ModelFacts(
        model_name="minilm",
        model_identity="minilm@aaaa",
        supported_tasks=("embed",),
        max_model_len=256,
        embedding_dim=4,
        is_matryoshka=False,
        matryoshka_dimensions=None,
        score_kind=ScoreKind.COSINE,
        output_fingerprint="x",
        normalizes_embeddings=True,
        default_dimensions=4,
    )
    rows = np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.raises(InvalidInputError, match="has ranges for 2 dimensions, and minilm gives 4"):
        QuantizationRanges.from_vectors({2: rows[:, :2]}, "minilm@aaaa").check_model(facts)
    with caplog.at_level("WARNING", logger="poolrag.postprocess.quantization_ranges"):
        QuantizationRanges.from_vectors({4: rows}, "/elsewhere/minilm@aaaa").check_model(facts)
        QuantizationRanges.from_vectors({4: rows}).check_model(facts)  # a hand-made file names none
        assert not caplog.records
        QuantizationRanges.from_vectors({4: rows}, "bge-small@bbbb").check_model(facts)
    (said,) = [r.getMessage() for r in caplog.records]
    assert "was measured on bge-small@bbbb, not on minilm@aaaa" in said
