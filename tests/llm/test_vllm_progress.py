"""vLLM's ``use_tqdm``: an ``LLM`` call draws vLLM's "Processed prompts" bar by default, advanced as
the engine answers (not once at the end), with the engine's batches unchanged."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from tqdm import tqdm

from poolrag import LLM, PoolingParams
from poolrag.core import executor

TEXTS = [f"sentence number {i} about the weather in a small town" for i in range(240)]


@pytest.fixture(scope="module")
def llm(minilm_path: Path) -> LLM:
    return LLM(str(minilm_path), runner="pooling", max_num_batched_tokens=256)


class RecordingBar(tqdm):
    """A tqdm class given as ``use_tqdm`` (as vLLM allows): it keeps what it was told."""

    made: ClassVar[list[RecordingBar]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, file=io.StringIO(), **kwargs)
        self.made_with, self.positions = kwargs, []
        RecordingBar.made.append(self)

    def update(self, n: float | None = 1) -> bool | None:
        done = super().update(n)
        self.positions.append(self.n)
        return done


def test_the_bar_is_vllms_and_drawn_by_default_on_stderr(
    llm: LLM, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.embed(TEXTS[:7])
    drawn = capsys.readouterr().err
    assert "Processed prompts" in drawn and "7/7" in drawn
    llm.embed(TEXTS[:7], use_tqdm=False)
    llm.score("a query", TEXTS[:3], use_tqdm=False)
    assert capsys.readouterr().err == ""


def test_the_bar_advances_as_batches_are_answered(llm: LLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "PROGRESS_POLL_S", 0)  # look after every batch, however fast
    RecordingBar.made.clear()
    with_bar = llm.embed(TEXTS, use_tqdm=RecordingBar)
    (bar,) = RecordingBar.made
    assert bar.made_with["total"] == len(TEXTS) and bar.made_with["desc"] == "Processed prompts"
    assert bar.positions == sorted(bar.positions) and bar.positions[-1] == len(TEXTS)
    assert len(bar.positions) > 2  # moved while the engine worked, not only when it returned
    without = llm.embed(TEXTS, use_tqdm=False)
    np.testing.assert_array_equal(
        [o.outputs.embedding for o in with_bar], [o.outputs.embedding for o in without]
    )


def test_one_bar_covers_a_call_with_several_pooling_params(llm: LLM) -> None:
    RecordingBar.made.clear()
    params = [PoolingParams(normalize=i % 2 == 0) for i in range(10)]
    llm.embed(TEXTS[:10], params, use_tqdm=RecordingBar)
    llm.score("a query", TEXTS[:5], use_tqdm=RecordingBar)
    embedded, scored = RecordingBar.made
    assert (embedded.made_with["total"], embedded.positions[-1]) == (10, 10)
    assert (scored.made_with["total"], scored.positions[-1]) == (5, 5)
