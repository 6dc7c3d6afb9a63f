"""Tiny model folders for runner tests, built once per session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_models import build_encoder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Callable[..., Path]:
    """``tiny_model(arch, head=None)`` → a folder with random weights and the MiniLM tokenizer."""
    built: dict[tuple[str, str | None], Path] = {}

    def make(arch: str, head: str | None = None) -> Path:
        if (arch, head) not in built:
            dest = tmp_path_factory.mktemp(f"runner-{arch}-{head or 'base'}")
            built[(arch, head)] = build_encoder(dest, arch, minilm_path, head=head)
        return built[(arch, head)]

    return make
