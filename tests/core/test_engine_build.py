"""Building an engine from its options: what it says about options it cannot take as given."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from poolrag import Engine


def test_a_batch_budget_below_the_models_length_is_raised_and_said(
    minilm_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A budget sized for memory (TEI's ``--max-batch-tokens 128``, which cuts inputs to 128 there)
    still runs a full-length input: the log says so, and how to cut inputs instead."""
    with caplog.at_level(logging.WARNING, logger="poolrag.core.engine_build"):
        engine = Engine(minilm_path, max_batch_tokens=128, tune="off")
    try:
        assert engine.max_batch_tokens == engine.max_model_len == 256
        said = [r.getMessage() for r in caplog.records if r.name == "poolrag.core.engine_build"]
        assert len(said) == 1 and "max_batch_tokens=128" in said[0] and "max_model_len=128" in said[0]
    finally:
        engine.close()
