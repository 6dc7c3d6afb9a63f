"""Float vectors turned into compact ones (int8, uint8, binary, ubinary) for the wire and for stores.

One function, so what ``Engine`` callers get equals what ``/v2/embed`` sends. The semantics are
sentence-transformers' ``quantize_embeddings`` (a scale per dimension from a calibration set, bits
packed big-end first as Cohere and numpy's ``packbits`` do), so vectors made here compare with ones
made there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.postprocess.quantization_ranges import QuantizationRanges

Precision = Literal["float", "int8", "uint8", "binary", "ubinary"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


def check_calibration(calibration: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """A calibration set as an (n, width) float32 matrix, refused when it cannot scale anything: a
    value that is not a finite float32 number (said first, whatever else is wrong), no vectors or
    vectors of several widths, or every dimension flat (one vector, or one repeated): each value
    would fall in one bucket, as with a batch of equal texts."""
    rows = [np.asarray(row, dtype=np.float64) for row in calibration]
    if not rows or any(row.ndim != 1 for row in rows):
        raise InvalidInputError("calibration must be a non-empty list of vectors")
    if not all((np.abs(row) <= np.finfo(np.float32).max).all() for row in rows):  # NaN compares false
        raise InvalidInputError(
            "calibration holds a value that is not a finite number within float32's range"
        )
    widths = sorted({row.size for row in rows})
    if len(widths) != 1:
        raise InvalidInputError(f"calibration vectors must all have one width, got widths {widths}")
    matrix = np.vstack(rows).astype(np.float32)
    if (matrix.min(axis=0) == matrix.max(axis=0)).all():
        many = "one vector" if len(rows) == 1 else f"{len(rows)} equal vectors"
        raise InvalidInputError(
            f"calibration is {many}: no dimension has a range to scale by (every value would fall in "
            "one bucket); send two or more different vectors"
        )
    return matrix


def calibration_ranges(calibration: np.ndarray, width: int) -> np.ndarray:
    """Per-dimension (min, max) of a calibration set, shape (2, width): :func:`check_calibration`'s
    rows, refused if their width differs from the embeddings'."""
    rows = check_calibration(calibration)
    if rows.shape[1] != width:
        raise InvalidInputError(
            f"calibration vectors have {rows.shape[1]} dimensions, the embeddings have {width}"
        )
    return np.vstack((rows.min(axis=0), rows.max(axis=0)))


def bucket_steps(ranges: np.ndarray) -> np.ndarray:
    """Each dimension's bucket width in (2, dim) ``ranges``: 1/255 of its span (a flat dimension: 1)."""
    steps = (ranges[1] - ranges[0]) / 255
    return np.where(steps == 0, 1, steps)


def bucket_centres(buckets: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """What uint8 ``buckets`` stand for: each bucket's centre, within half a bucket of the vector
    (a flat dimension's one value exactly)."""
    centres = ranges[0] + bucket_steps(ranges) * (np.asarray(buckets, dtype=np.float32) + 0.5)
    return np.where(ranges[1] == ranges[0], ranges[0], centres).astype(np.float32)


def _fixed_bounds(ranges: QuantizationRanges | np.ndarray, width: int) -> np.ndarray:
    """The (2, width) bounds of a ranges file, or of an array as sentence-transformers' ``ranges``
    argument holds them (its users keep them so), refused by name when it cannot scale ``width``."""
    if isinstance(ranges, QuantizationRanges):
        return ranges.for_width(width)
    bounds = np.asarray(ranges, dtype=np.float32)
    if bounds.shape != (2, width):
        raise InvalidInputError(
            f"ranges must be a (2, {width}) array (each dimension's minimum, then maximum), "
            f"got shape {bounds.shape}"
        )
    if not np.isfinite(bounds).all() or (bounds[0] > bounds[1]).any():
        raise InvalidInputError("ranges must be finite numbers with each minimum at most its maximum")
    return bounds


def quantize_vectors(
    vectors: np.ndarray,
    precision: str,
    calibration: np.ndarray | None = None,
    ranges: QuantizationRanges | np.ndarray | None = None,
) -> np.ndarray:
    """``vectors`` (n, dim) in ``precision``: int8/uint8 scaled per dimension between the min and max
    of ``calibration`` vectors, else the fixed ``ranges`` (of a ranges file, or a (2, dim) array of
    minima and maxima as ``quantize_embeddings`` takes them), else of ``vectors``
    themselves (two or more rows; batch-dependent); binary/ubinary one bit per dimension (value > 0)
    packed into (n, ceil(dim / 8)) bytes, binary shifted by -128 into int8."""
    if precision == "float32":  # sentence-transformers' name of the same
        precision = "float"
    if precision not in PRECISIONS:
        raise InvalidInputError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    given = np.asarray(vectors)
    if given.dtype in (np.int8, np.uint8):  # as quantize_embeddings: codes are not quantized again
        raise InvalidInputError(f"vectors to quantize must be float, not {given.dtype} (already quantized?)")
    rows = given.astype(np.float32, copy=False)
    if rows.ndim != 2:
        raise InvalidInputError(f"vectors must be 2-D (n, dim), got shape {rows.shape}")
    if precision == "float":
        return rows
    if not len(rows):  # nothing to scale: an empty answer of the type asked for
        width = -(-rows.shape[1] // 8) if precision in ("binary", "ubinary") else rows.shape[1]
        return np.empty((0, width), dtype=np.int8 if precision in ("int8", "binary") else np.uint8)
    if precision in ("binary", "ubinary"):
        packed = np.packbits(rows > 0, axis=-1)
        return (packed.astype(np.int16) - 128).astype(np.int8) if precision == "binary" else packed
    if calibration is not None:
        bounds = calibration_ranges(calibration, rows.shape[1])
    elif ranges is not None:
        bounds = _fixed_bounds(ranges, rows.shape[1])
    elif rows.shape[0] >= 2:
        bounds = np.vstack((rows.min(axis=0), rows.max(axis=0)))
        if (bounds[0] == bounds[1]).all():
            raise InvalidInputError(
                f"{precision} scaled by the vectors themselves needs them to differ, and these are all "
                "equal (the same text repeated?): send calibration vectors or use fixed ranges"
            )
    else:
        raise InvalidInputError(
            f"{precision} of one vector needs fixed ranges (a calibration set, or a ranges file from "
            "'poolrag calibrate') to scale each dimension"
        )
    buckets = np.clip(np.floor((rows - bounds[0]) / bucket_steps(bounds)), 0, 255)  # 0..255 per dimension
    return buckets.astype(np.uint8) if precision == "uint8" else (buckets - 128).astype(np.int8)
