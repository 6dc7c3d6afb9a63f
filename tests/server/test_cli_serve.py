"""``poolrag serve``'s command line (the running server itself is the ``minilm_server`` fixture,
started through this CLI)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from poolrag.cli import build_parser, main


def test_serve_options_parse_with_loopback_defaults() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "some/model",
            "--served-model-name",
            "a",
            "b",
            "--pooler-config",
            '{"normalize": false}',
            "--hf-overrides",
            '{"is_matryoshka": true}',
            "--max-queue",
            "8",
        ]
    )
    assert args.host == "127.0.0.1" and args.port == 8000
    assert args.served_model_name == ["a", "b"]
    assert args.pooler_config == {"normalize": False}
    assert args.hf_overrides == {"is_matryoshka": True}
    assert args.max_queue == 8 and args.max_inputs == 2048
    assert args.allowed_origins is None and not args.allow_credentials  # no CORS unless asked (vLLM: any)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--pooler-config", "{not json", "not valid JSON"),
        ("--hf-overrides", "[1, 2]", "must be a JSON object"),
        ("--max-queue", "0", "must be at least 1"),
        ("--max-body-bytes", "lots", "not an integer"),
        ("--allowed-origins", "http://app.example", "not valid JSON"),  # vLLM's form is a JSON list
        ("--allowed_origins", '"*"', "must be a JSON list of non-empty strings"),
    ],
)
def test_bad_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "some/model", option, value])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_model_that_cannot_load_exits_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(tmp_path), "--port", "0"]) == 2
    assert "poolrag serve: cannot start:" in capsys.readouterr().err


def test_a_busy_port_is_refused_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # a model that cannot load: had it been tried first, the error would be about the model
        code = main(["serve", str(tmp_path / "no-such-model"), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"poolrag serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
