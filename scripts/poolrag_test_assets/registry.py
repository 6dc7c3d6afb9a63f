"""Which asset folders exist, what each is built from and by what, and whether a built folder is
current (its marker matches the pinned source and asset version). Where they live is
:mod:`poolrag.testing.test_assets`, which tests that only read them use without this builder."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolrag.testing.test_assets import DEFAULT_DEST as DEFAULT_DEST  # re-exported: the builder's names
from poolrag.testing.test_assets import ENV_DEST as ENV_DEST
from poolrag.testing.test_assets import MARKER_NAME
from poolrag.testing.test_assets import resolve_dest as resolve_dest
from poolrag_test_assets.bge import build_bge
from poolrag_test_assets.colbert import build_colbert_hf, build_colbert_pylate
from poolrag_test_assets.rampart import build_rampart
from poolrag_test_assets.reranker import build_reranker
from poolrag_test_assets.sources import (
    ASSET_VERSION,
    BGE_SOURCE,
    COLBERT_SOURCE,
    RAMPART_SOURCE,
    RERANKER_SOURCE,
    Source,
)

REFERENCE_DIR = "reference-onnx"


@dataclass(frozen=True)
class AssetSpec:
    """A folder under the destination and the function that writes it from its source files."""

    folder: str
    source: Source
    build: Callable[[Path, Path, Source], None]  # (extracted model_dir, output folder, source)
    description: str


ASSETS: tuple[AssetSpec, ...] = (
    AssetSpec("bge-small-en-v1.5", BGE_SOURCE, build_bge, "sentence-transformers embedder, CLS pooling"),
    AssetSpec("ms-marco-MiniLM-L-12-v2", RERANKER_SOURCE, build_reranker, "cross-encoder, 1 logit"),
    AssetSpec("colbert-hf", COLBERT_SOURCE, build_colbert_hf, "ColBERT, Stanford HF_ColBERT layout"),
    AssetSpec("colbert-pylate", COLBERT_SOURCE, build_colbert_pylate, "ColBERT, PyLate layout"),
    AssetSpec("rampart-pii", RAMPART_SOURCE, build_rampart, "BertForTokenClassification, 35 PII labels"),
)

ASSETS_BY_FOLDER = {spec.folder: spec for spec in ASSETS}


def reference_onnx(dest: Path, folder: str) -> Path:
    """Where the untouched source ONNX of an asset folder is kept, for comparisons in tests."""
    source = ASSETS_BY_FOLDER[folder].source
    return dest / REFERENCE_DIR / f"{source.package.name}-{source.package.version}" / source.onnx_member


def marker(spec: AssetSpec) -> dict[str, Any]:
    return {
        "asset_version": ASSET_VERSION,
        "source": spec.source.package.requirement,
        "onnx": spec.source.onnx_member,
        "onnx_sha256": spec.source.sha256,
    }


def is_current(dest: Path, spec: AssetSpec) -> bool:
    """True when the folder was completed by this asset version and its reference ONNX exists."""
    try:
        stamp = json.loads((dest / spec.folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    expected = marker(spec)
    return all(stamp.get(k) == v for k, v in expected.items()) and reference_onnx(dest, spec.folder).is_file()
