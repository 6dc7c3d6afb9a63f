"""TEI's ``--auto-truncate true|false`` on every ``poolrag`` command, as ``text-embeddings-router``
takes it."""

from __future__ import annotations

import pytest

from poolrag.cli import build_parser


@pytest.mark.parametrize(
    "line",
    [
        ["serve", "--auto-truncate", "false", "m"],
        ["serve", "m", "--auto-truncate", "false"],
        ["serve", "m", "--auto-truncate=False"],
        ["serve", "--model", "m", "--auto_truncate", "FALSE"],
    ],
)
def test_teis_false_value_refuses_long_inputs_and_is_no_model(line: list[str]) -> None:
    args = build_parser().parse_args(line)
    assert args.auto_truncate is False
    assert (args.model or args.model_option) == "m" and args.more_models == []


@pytest.mark.parametrize(
    "line",
    [["serve", "m", "--no-auto-truncate", "--auto-truncate", "true"], ["serve", "m", "--auto-truncate"]],
)
def test_teis_true_value_and_the_bare_switch_cut_long_inputs(line: list[str]) -> None:
    args = build_parser().parse_args(line)
    assert args.auto_truncate is True and args.model == "m" and args.more_models == []


def test_a_value_that_is_no_boolean_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "m", "--auto-truncate=maybe"])
    assert "ignored explicit argument 'maybe'" in capsys.readouterr().err


def test_a_model_named_after_the_switch_is_still_the_model() -> None:
    """Only ``true``/``false`` is the switch's value: ``--auto-truncate MODEL`` keeps MODEL."""
    args = build_parser().parse_args(["serve", "--auto-truncate", "m", "true"])
    assert args.auto_truncate is True and args.model == "m" and args.more_models == ["true"]
