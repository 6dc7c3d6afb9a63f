"""``poolrag COMMAND --help``: what a user reads before the docs."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag import __version__
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


def test_every_count_a_flag_shows_in_vllms_form_is_the_count_it_parses_to() -> None:
    """``--max-model-len`` said '32k, 32K (32,768)', reading as if both were 32,768; the flag takes
    vLLM's forms as vLLM does, ``32k`` as 32,000 (decimal) and only ``32K`` as 32,768."""
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    wrong = []
    for command, parser in subparsers.choices.items():
        for action in parser._actions:
            if not action.option_strings or action.help in (None, argparse.SUPPRESS) or action.type is None:
                continue
            said = parser._get_formatter()._expand_help(action)
            for form in re.finditer(r"\b(\d+[kKmMgGtT])\b(?: \(([\d,]+)\))?", said):
                try:
                    value = action.type(form.group(1))
                except argparse.ArgumentTypeError:  # not a count this flag takes (--candidates' 10k)
                    continue
                if form.group(2) is None or int(form.group(2).replace(",", "")) != value:
                    flag = action.option_strings[0]
                    wrong.append(f"poolrag {command} {flag}: {form.group(0)!r} is {value:,}")
    assert not wrong, wrong


def test_python_dash_m_poolrag_is_the_poolrag_command() -> None:
    """A venv whose scripts folder is not on PATH runs ``python -m poolrag``, as ``python -m pip``."""
    ran = subprocess.run(
        [sys.executable, "-m", "poolrag", "--version"], capture_output=True, text=True, timeout=120
    )
    assert (ran.returncode, ran.stdout.strip(), ran.stderr) == (0, f"poolrag {__version__}", "")
