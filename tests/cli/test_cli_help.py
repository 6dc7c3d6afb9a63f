"""``poolrag COMMAND --help``: what a user reads before the docs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from poolrag.cli import build_parser


def test_every_numeric_default_is_named_in_its_flags_help() -> None:
    """``--retries``, ``--retry-delay``, ``--batch-size``, ``--ray-workers`` and ``serve --workers``
    said nothing of their defaults (5, 0.5 s, 64, 1, 1), which only docs/ingest.md named."""
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    silent = []
    for command, parser in subparsers.choices.items():
        for action in parser._actions:
            default = action.default
            if not action.option_strings or action.help in (None, argparse.SUPPRESS):
                continue
            if isinstance(default, bool) or not isinstance(default, (int, float)):
                continue
            said = parser._get_formatter()._expand_help(action)  # as --help prints it: %(default)s filled
            value = "|".join(re.escape(form) for form in {str(default), f"{default:g}"})  # 10.0 or 10
            if not re.search(rf"(default:? |must be )({value})\b", said):
                silent.append(f"poolrag {command} {action.option_strings[0]} (default {default})")
    assert not silent, silent


def test_the_cache_flag_names_the_file_this_run_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said ``~/.cache/poolrag/embeddings.sqlite`` even where ``$POOLRAG_CACHE_DIR`` moved it."""
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ingest", "--help"])
    said = "".join(capsys.readouterr().out.split())  # argparse wraps a long path, even inside it
    assert f"(default:{tmp_path / 'elsewhere' / 'embeddings.sqlite'})" in said
