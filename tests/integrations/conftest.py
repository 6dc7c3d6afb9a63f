"""Models and live servers shared by the LangChain and LlamaIndex adapter tests.

Engines are session-scoped and shared between the in-process adapters and the servers that the
remote adapters call (``create_app`` on 127.0.0.1, a free port, uvicorn in a thread), so "remote
equals in-process" compares one model through two paths. The reranker and ColBERT tests run on
real converted models from ``scripts/build_test_assets.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_server import serve
from rag_corpus import API_KEY

from poolrag import Engine

# tests/ is on sys.path (tests/conftest.py), so this folder could pass for a namespace package named
# ``integrations`` and shadow the real one at the repository root, which an editable install only
# finds after sys.path. Putting the root first makes ``import integrations`` mean the adapters.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- models ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def cross_encoder_engine(assets: Path) -> Engine:
    """ms-marco-MiniLM-L-12-v2, a real cross-encoder (converted from a PyPI wheel)."""
    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


@pytest.fixture(scope="session")
def colbert_engine(assets: Path) -> Engine:
    """A real ColBERT model in PyLate layout (96-dim token vectors)."""
    return Engine(assets / "colbert-pylate")


@pytest.fixture(scope="session")
def matryoshka_engine(minilm_path: Path) -> Engine:
    """MiniLM declared Matryoshka so that ``dimensions`` can be exercised."""
    return Engine(minilm_path, hf_overrides={"matryoshka_dimensions": [128, 256, 384]})


@pytest.fixture(scope="session")
def prompted_minilm_path(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM with sentence-transformers query/document prompts, to see input_type select them."""
    folder = tmp_path_factory.mktemp("prompted") / "minilm-prompted"
    shutil.copytree(minilm_path, folder)
    config_path = folder / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config["prompts"] = {"query": "query: ", "document": "passage: "}
    config_path.write_text(json.dumps(config))
    return folder


# -- servers (same engines) ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm")


@pytest.fixture(scope="session")
def matryoshka_url(matryoshka_engine: Engine) -> Iterator[str]:
    yield from serve(matryoshka_engine, "minilm-matryoshka")


@pytest.fixture(scope="session")
def keyed_minilm_url(minilm_engine: Engine) -> Iterator[str]:
    """Requires ``Authorization: Bearer API_KEY``."""
    yield from serve(minilm_engine, "minilm", api_key=API_KEY)


@pytest.fixture(scope="session")
def cross_encoder_url(cross_encoder_engine: Engine) -> Iterator[str]:
    yield from serve(cross_encoder_engine, "reranker")


@pytest.fixture(scope="session")
def colbert_url(colbert_engine: Engine) -> Iterator[str]:
    yield from serve(colbert_engine, "colbert")
