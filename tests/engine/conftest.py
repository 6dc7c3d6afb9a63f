"""Fixtures for engine tests: a cache of tiny model folders shared across a test session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_models import build_encoder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Callable[..., Path]:
    """``tiny_model(arch, head=None, num_labels=2)`` → folder, built once per combination."""
    built: dict[tuple[object, ...], Path] = {}

    def make(arch: str, head: str | None = None, num_labels: int = 2, **extra: object) -> Path:
        key = (arch, head, num_labels, tuple(sorted(extra.items())))
        if key not in built:
            dest = tmp_path_factory.mktemp(f"{arch}-{head or 'base'}")
            built[key] = build_encoder(dest, arch, minilm_path, head=head, num_labels=num_labels, **extra)
        return built[key]

    return make
