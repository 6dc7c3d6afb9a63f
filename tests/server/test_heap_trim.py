"""The idle trim is housekeeping: it runs again on a new event loop (a lifespan started twice, as a
test client does) and goes on after a release that fails."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from poolrag.server.heap_trim import IdleTrim


async def _spells(idle: IdleTrim, count: int, done: Callable[[], int]) -> None:
    """``count`` times: a request comes and goes, then the trimmer gets the idle time to act."""
    trimmer = asyncio.create_task(idle.run())
    for spell in range(1, count + 1):
        idle.started()
        idle.finished()
        for _ in range(500):
            await asyncio.sleep(0.01)
            if done() >= spell:
                break
        assert not trimmer.done(), trimmer.exception()
    trimmer.cancel()


def test_each_loop_gets_its_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    idle = IdleTrim(0.01)
    monkeypatch.setattr(idle, "release", lambda: None)
    asyncio.run(_spells(idle, 1, lambda: idle.trims))
    assert idle.trims == 1
    asyncio.run(_spells(idle, 1, lambda: idle.trims - 1))  # a second lifespan, on a loop of its own
    assert idle.trims == 2


def test_a_failing_release_is_logged_and_trimming_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    idle = IdleTrim(0.01)
    calls: list[int] = []

    def release() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("no trim today")

    monkeypatch.setattr(idle, "release", release)
    with caplog.at_level(logging.WARNING, logger="poolrag.server.heap_trim"):
        asyncio.run(_spells(idle, 2, lambda: len(calls)))
    assert len(calls) == 2 and idle.trims == 1
    assert "idle memory trim failed" in caplog.text
