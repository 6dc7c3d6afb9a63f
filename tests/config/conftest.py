"""Fixtures of the model-resolution tests."""

from __future__ import annotations

import huggingface_hub
import pytest


@pytest.fixture
def hub_asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids the hub was asked for; it answers as an unreachable hub does, whatever the network."""
    asked: list[str] = []

    def unreachable(repo_id: str, **_: object) -> str:
        asked.append(repo_id)
        raise OSError("no network in this test")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    return asked
