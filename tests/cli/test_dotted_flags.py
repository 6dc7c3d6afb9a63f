"""vLLM's dotted flags (``--pooler-config.task token_embed``) on every ``poolrag`` command."""

from __future__ import annotations

import pytest

from poolrag.cli import build_parser
from poolrag.cli.serve import engine_args_of


def test_dotted_pooler_config_keys_are_its_json_object() -> None:
    args = build_parser().parse_args(
        ["serve", "m", "--pooler-config.task", "token_embed", "--pooler_config.normalize=false"]
    )
    assert args.pooler_config == {"task": "token_embed", "normalize": False}
    assert engine_args_of(args).pooler_config.task == "token_embed"


def test_dotted_keys_merge_over_the_lines_own_json_and_nest() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "m",
            "--pooler-config",
            '{"normalize": true, "task": "embed"}',
            "--pooler-config.task",
            "token_embed",
            "--hf-overrides.rope_scaling.factor",
            "2.0",
        ]
    )
    assert args.pooler_config == {"normalize": True, "task": "token_embed"}
    assert args.hf_overrides == {"rope_scaling": {"factor": 2.0}}


def test_a_dotted_flag_without_a_value_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "m", "--pooler-config.task"])
    assert "argument --pooler-config.task: expected one argument" in capsys.readouterr().err


@pytest.mark.parametrize(("written", "read"), [("False", False), ("TRUE", True), ("false", False)])
def test_a_boolean_is_read_however_it_is_capitalised(written: str, read: bool) -> None:
    """``--pooler-config.normalize False`` stayed the text "False", which read as true: normalised."""
    args = build_parser().parse_args(["serve", "m", "--pooler-config.normalize", written])
    assert args.pooler_config == {"normalize": read}
