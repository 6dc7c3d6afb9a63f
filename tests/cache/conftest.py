from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def matryoshka_minilm(minilm_path: Path):
    """MiniLM declared Matryoshka: it was not trained for it, but truncation mechanics are the same."""
    from poolrag import Engine

    return Engine(minilm_path, hf_overrides={"is_matryoshka": True})
