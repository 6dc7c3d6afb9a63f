"""Tiny model folders for engine-core tests, built once per session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_models import build_encoder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Callable[..., Path]:
    """``tiny_model(arch, head=None, num_labels=2)`` → a folder with random weights and the MiniLM
    tokenizer."""
    built: dict[tuple[str, str | None, int], Path] = {}

    def make(arch: str, head: str | None = None, num_labels: int = 2) -> Path:
        key = (arch, head, num_labels)
        if key not in built:
            dest = tmp_path_factory.mktemp(f"core-{arch}-{head or 'base'}-{num_labels}")
            built[key] = build_encoder(dest, arch, minilm_path, head=head, num_labels=num_labels)
        return built[key]

    return make
