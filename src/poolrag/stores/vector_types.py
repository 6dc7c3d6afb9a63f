"""What a collection stores per dense vector: float32, float16 or uint8, and how search reads it back.

The compact types are the ones the server puts on the wire (``/v1/embeddings`` with
``embed_dtype=float16``, ``/v2/embed`` with ``embedding_types=["uint8"]``), made by the same
functions, so a store written by ``poolrag ingest --vector-type`` holds exactly what a client of the
server would upsert itself. float16 halves the store and changes a cosine by ~1e-4; uint8 quarters it.

uint8 values are the bucket of each dimension between fixed ranges (a calibration file, recorded in
the collection so every later write and query uses the same scale). A database compares uint8
vectors only with a uint8 query, which cannot hold the exact (signed) query, so a uint8 search is two
stages: the database's own search with the closest uint8 query (:meth:`StoredVectors.first_stage_query`),
``RESCORE_DEPTH`` times deeper than asked, then those candidates re-ranked here by the float query's
dot product with each stored vector's bucket centres (what the chunk's vector was, to half a bucket).
Both are compared by dot product, which is the cosine only of unit-length vectors, so they hold unit
vectors only (:func:`check_unit_length`): a model that does not normalise its embeddings would rank
by length times cosine there, and by cosine in a float32 collection.

int8 and binary are not offered: Qdrant has no int8 type (uint8 is int8 shifted by 128) and no
packed-bit type (its binary *index* quantization keeps the floats: ``--index-quantization``), and
Milvus Lite stores float32 only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from poolrag.errors import InvalidInputError
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.postprocess.vector_precision import bucket_centres, bucket_steps, quantize_vectors

logger = logging.getLogger(__name__)

VectorType = Literal["float32", "float16", "uint8"]
VECTOR_TYPES: tuple[str, ...] = get_args(VectorType)
#: A uint8 search asks the database for this many times the hits wanted (at least ``MIN_CANDIDATES``)
#: before re-ranking them by the float query; chosen on real FAQ sets (benchmarks/RESULTS.md).
RESCORE_DEPTH = 16
MIN_CANDIDATES = 160
#: How far from 1 a compact vector's length may be: float32 rounding of a normalised vector is ~1e-7.
UNIT_LENGTH_TOLERANCE = 1e-3


def check_vector_type(vector_type: str) -> str:
    if vector_type not in VECTOR_TYPES:
        raise InvalidInputError(f"vector type must be one of {', '.join(VECTOR_TYPES)}, got {vector_type!r}")
    return vector_type


def check_index_quantization(vector_type: str, quantization: str | None) -> None:
    """Refuse a binary index over uint8 vectors: it keeps each value's sign bit, and a uint8 value is
    never negative, so every vector gets the same code and the index's first stage picks its
    candidates blind (recall@10 0.13 against 0.59 without the index, 20,000 clustered vectors)."""
    if vector_type == "uint8" and quantization == "binary":
        raise InvalidInputError(
            "a binary index keeps each value's sign bit, and uint8 values are never negative, so "
            "every vector would get the same code: use --index-quantization int8 (or none) with "
            "--vector-type uint8, or a binary index over float16 or float32 vectors"
        )


def checked_ranges(ranges: object, dimension: int) -> np.ndarray:
    """A collection's recorded uint8 ranges as a (2, dimension) float32 array, or one clear error."""
    try:
        array = np.asarray(ranges, dtype=np.float32)
    except (TypeError, ValueError):
        array = np.empty(0)
    if array.shape != (2, dimension):
        raise InvalidInputError(
            f"uint8 vectors need ranges of shape (2, {dimension}) (min and max per dimension), "
            f"got {array.shape}"
        )
    if not np.isfinite(array).all() or (array[0] > array[1]).any():
        raise InvalidInputError("uint8 ranges must be finite numbers with each minimum at most its maximum")
    return array


def check_unit_length(vectors: np.ndarray, vector_type: str) -> None:
    """Refuse ``(n, dim)`` vectors for a ``vector_type`` collection unless each is unit length (or all
    zero): its database compares them by dot product, the cosine of unit vectors only, where a float32
    collection compares by cosine whatever their length."""
    norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64), axis=-1)
    off = (np.abs(norms - 1) > UNIT_LENGTH_TOLERANCE) & (norms > 0)
    if off.any():
        i = int(np.argmax(off))
        raise InvalidInputError(
            f"{vector_type} vectors are compared by dot product, a cosine only for unit-length vectors, "
            f"and vector {i} has length {norms[i]:.4g}: normalise them (a model that does not normalise "
            "its embeddings: --pooler-config '{\"normalize\": true}', in calibrate and search too)"
        )


@dataclass(frozen=True)
class StoredVectors:
    """The codec of one collection's dense vectors: what is written, what a query asks, what it means."""

    vector_type: str = "float32"
    ranges: np.ndarray | None = None  # (2, dim) minima and maxima, for uint8

    @property
    def rescored(self) -> bool:
        """Whether a search re-ranks the database's candidates here (uint8)."""
        return self.vector_type == "uint8"

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """``(n, dim)`` float vectors as the store holds them (what the server sends for this type)."""
        given = np.asarray(vectors)
        if self.vector_type != "float32" and given.dtype.kind in "iub":  # a server's int8/uint8 codes
            raise InvalidInputError(
                f"vectors to store as {self.vector_type} must be the float embeddings, not "
                f"{given.dtype} values (already quantized?): the store makes the {self.vector_type} "
                "values itself"
            )
        rows = given.astype(np.float32, copy=False)
        if self.vector_type == "float32":
            return rows
        if not np.isfinite(rows).all():  # would become a bucket or an inf silently
            raise InvalidInputError(
                f"a vector to store as {self.vector_type} holds a value that is not finite"
            )
        if self.vector_type == "float16":
            if rows.size and float(np.abs(rows).max()) > float(np.finfo(np.float16).max):
                raise InvalidInputError("a vector holds a value beyond float16's range (±65504)")
            return rows.astype(np.float16)
        assert self.ranges is not None  # uint8
        _warn_outside(rows, self.ranges)
        return quantize_vectors(rows, "uint8", ranges=QuantizationRanges({self.ranges.shape[1]: self.ranges}))

    def decode(self, stored: np.ndarray) -> np.ndarray:
        """Stored rows as float32: float16 widened, a uint8 bucket as its centre."""
        if self.vector_type != "uint8":
            return np.asarray(stored, dtype=np.float32)
        assert self.ranges is not None
        return bucket_centres(stored, self.ranges)

    def first_stage_query(self, query: np.ndarray) -> np.ndarray:
        """The query the database compares with its stored rows. For uint8, a row's exact score up to
        a constant is ``Σ q_i step_i bucket_i``; a uint8 query cannot hold a negative weight, so the
        weights are ``(q - min q) ⊙ step`` mapped onto 0..255: the query raised by one amount in
        every dimension. Its bias is then a row's sum of values (``Σ step_i bucket_i``), the same for
        every dimension; shifting ``q ⊙ step`` instead weights the bias by ``1 / step`` and bucketing
        the query like the rows weights the score so, and both hold less of the float top 10 at
        every depth on the real sets (benchmarks/RESULTS.md)."""
        if not self.rescored:
            return query
        assert self.ranges is not None
        weights = (query - query.min()) * bucket_steps(self.ranges)
        high = float(weights.max())
        if high <= 0:
            return np.full_like(weights, 128, dtype=np.float32)
        return np.round(weights * (255 / high)).astype(np.float32)

    def candidates(self, limit: int) -> int:
        """How many hits the database is asked for before a uint8 re-rank."""
        return max(limit * RESCORE_DEPTH, MIN_CANDIDATES) if self.rescored else limit


#: the ranges (their bytes' digest) whose clipping was already said in this process
_CLIPPING_SAID: set[int] = set()


def _warn_outside(rows: np.ndarray, ranges: np.ndarray) -> None:
    """Say, once per process and ranges, that values fell outside them: such a value is stored as
    the edge bucket, and its scores are then off by more than half a bucket (ranges measured on
    other documents, or on the first of many). A value within half a bucket of an edge is not: the
    same chunk embedded in another batch or on another path (the cache's vector, computed by an
    earlier run) differs from calibrate's by float rounding, and is stored as faithfully as one inside."""
    slack = bucket_steps(ranges) / 2
    outside = (rows < ranges[0] - slack) | (rows > ranges[1] + slack)
    key = hash(ranges.tobytes())
    if not outside.any() or key in _CLIPPING_SAID:
        return
    _CLIPPING_SAID.add(key)
    logger.warning(
        "%.2f%% of the values in a batch of %d vectors fall outside the uint8 ranges and are clipped, "
        "so their scores lose accuracy: calibrate on these documents ('poolrag calibrate')",
        100 * outside.mean(),
        len(rows),
    )
