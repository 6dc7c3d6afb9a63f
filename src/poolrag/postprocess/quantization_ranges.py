"""Fixed per-dimension ranges for int8 / uint8 vectors, kept as a file of numbers.

Scaling each dimension by the batch it arrives in (what ``quantize_embeddings`` does without a
calibration set) gives the same text different bytes in different requests, and a single text no
range at all. A ranges file fixes the scale once: ``poolrag calibrate`` writes it from texts the
user chooses, ``poolrag serve --calibration`` and ``poolrag ingest --calibration`` read it, and a
model folder may ship its own as ``quantization_ranges.json``. Ranges are kept per output width,
because a Matryoshka prefix renormalised to fewer dimensions has other ranges than the full vector.

The file is JSON holding only numbers and names; nothing in it is imported or run.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from poolrag.cache_location import partial_path
from poolrag.errors import InvalidInputError
from poolrag.model_facts import ModelFacts, same_weights

logger = logging.getLogger(__name__)

#: The file a model folder ships its own ranges in (found next to its config.json).
RANGES_FILE = "quantization_ranges.json"
_FORMAT = "poolrag-quantization-ranges"
_VERSION = 1


@dataclass(frozen=True)
class QuantizationRanges:
    """Per-dimension (min, max) of a model's vectors, for each output width calibrated.

    Attributes:
        by_width: width -> array of shape (2, width): row 0 the minima, row 1 the maxima.
        model: the model identity the ranges were measured on (a check, not a key: any model of
            that width may use them, as with any calibration set).
        source: where the ranges came from, for error messages.
    """

    by_width: Mapping[int, np.ndarray]
    model: str = ""
    source: str = "calibration"

    @classmethod
    def from_vectors(cls, vectors: Mapping[int, np.ndarray], model: str = "") -> QuantizationRanges:
        """The ranges of calibration vectors, one matrix per output width."""
        by_width = {}
        for width, rows in vectors.items():
            matrix = np.asarray(rows, dtype=np.float32)
            if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != width:
                raise InvalidInputError(f"calibration vectors for width {width} have shape {matrix.shape}")
            by_width[int(width)] = np.vstack((matrix.min(axis=0), matrix.max(axis=0)))
        return cls(by_width, model)

    def for_width(self, width: int) -> np.ndarray:
        """The (2, width) ranges of vectors ``width`` long; refused, naming the widths the file has."""
        ranges = self.by_width.get(width)
        if ranges is None:
            have = ", ".join(str(w) for w in sorted(self.by_width))
            raise InvalidInputError(
                f"{self.source} has ranges for {have} dimensions, not {width}; "
                f"calibrate with --dimensions {width}"
            )
        return ranges

    def check_model(self, facts: ModelFacts) -> None:
        """Ranges for the model about to use them: one it can give a width of (else refused, naming
        both), measured on its own weights (else a warning: another model's values fall outside
        them, where they are clipped)."""
        widths = set(self.by_width)
        usable = {facts.embedding_dim, facts.default_dimensions} & widths
        if facts.is_matryoshka and facts.embedding_dim is not None:
            allowed = facts.matryoshka_dimensions
            usable |= {w for w in widths if w <= facts.embedding_dim and (allowed is None or w in allowed)}
        if not usable:
            have = ", ".join(str(w) for w in sorted(widths))
            raise InvalidInputError(
                f"{self.source} has ranges for {have} dimensions, and {facts.model_name} gives "
                f"{facts.default_dimensions or facts.embedding_dim}: calibrate with this model "
                "('poolrag calibrate --model ...')"
            )
        if self.model and not same_weights(self.model, facts.model_identity):
            logger.warning(
                "%s was measured on %s, not on %s: this model's values may fall outside its ranges, "
                "where they are clipped; calibrate with this model",
                self.source,
                self.model,
                facts.model_identity,
            )

    def save(self, path: str | Path) -> Path:
        """Write the ranges as JSON (floats kept exactly as float32 values print), under a name of
        its own and renamed over ``path``, so a reader (a ``poolrag serve --calibration`` worker, an
        ingest) never sees it cut short and a write the disk refuses leaves the old file whole."""
        path = Path(path)
        document = {
            "format": _FORMAT,
            "version": _VERSION,
            "model": self.model,
            "ranges": {
                str(width): {"min": ranges[0].tolist(), "max": ranges[1].tolist()}
                for width, ranges in sorted(self.by_width.items())
            },
        }
        target = Path(os.path.realpath(path))  # a link to the ranges file stays a link
        partial = partial_path(target)
        try:
            partial.write_text(json.dumps(document), encoding="utf-8")
            partial.replace(target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | Path) -> QuantizationRanges:
        """Read and check a ranges file; anything else is one error naming the file and the cause."""
        path = Path(path)
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidInputError(f"{path}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidInputError(f"{path}: not a quantization ranges file (not JSON: {exc})") from None
        return cls(_checked_ranges(document, path), _text(document, "model", path), str(path))


def _text(document: Any, key: str, path: Path) -> str:
    value = document.get(key, "") if isinstance(document, dict) else ""
    if not isinstance(value, str):
        raise InvalidInputError(f"{path}: {key!r} must be a string")
    return value


def _checked_ranges(document: Any, path: Path) -> dict[int, np.ndarray]:
    if not isinstance(document, dict) or document.get("format") != _FORMAT:
        raise InvalidInputError(f'{path}: not a quantization ranges file (no "format": "{_FORMAT}")')
    if document.get("version") != _VERSION:
        raise InvalidInputError(f"{path}: version {document.get('version')!r} is not {_VERSION}")
    ranges = document.get("ranges")
    if not isinstance(ranges, dict) or not ranges:
        raise InvalidInputError(f"{path}: 'ranges' must map widths to their min and max")
    by_width = {}
    for key, entry in ranges.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) > 0):
            raise InvalidInputError(f"{path}: width {key!r} is not a positive whole number")
        width = int(key)
        bounds = [_floats(entry, side, width, path) for side in ("min", "max")]
        if any(low > high for low, high in zip(*bounds, strict=True)):
            raise InvalidInputError(f"{path}: width {width} has a minimum above its maximum")
        by_width[width] = np.asarray(bounds, dtype=np.float32)
    return by_width


def _floats(entry: Any, side: str, width: int, path: Path) -> list[float]:
    values = entry.get(side) if isinstance(entry, dict) else None
    if not isinstance(values, list) or len(values) != width or not all(map(_finite_number, values)):
        raise InvalidInputError(f"{path}: width {width}: {side!r} must be {width} finite numbers")
    return [float(v) for v in values]


def _finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def shipped_ranges(model_folder: str | Path) -> QuantizationRanges | None:
    """The ranges a model folder ships (``quantization_ranges.json``), or ``None`` when it has none."""
    path = Path(model_folder) / RANGES_FILE
    return QuantizationRanges.load(path) if path.is_file() else None
