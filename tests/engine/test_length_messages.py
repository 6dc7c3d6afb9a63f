"""Over-long input is reported once, by poolrag, with the limit that applies (max_model_len); the
tokenizer's own warning about a different limit (its model_max_length) is not shown."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from poolrag import Engine, InputTooLongError


def test_only_poolrags_length_error_is_shown(minilm_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    engine = Engine(minilm_path, truncate=False)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_warning()
    try:
        capfd.readouterr()
        with pytest.raises(InputTooLongError, match="maximum of 256"):
            engine.embed(["word " * 1000])
        captured = capfd.readouterr()
    finally:
        transformers.logging.set_verbosity(verbosity)
    assert "Token indices sequence length" not in captured.err + captured.out
