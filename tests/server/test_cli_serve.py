"""``poolrag serve``'s command line (the running server itself is the ``minilm_server`` fixture,
started through this CLI)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI

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


def test_teis_short_port_flag_is_the_port() -> None:
    """``-p 3000`` as ``text-embeddings-router`` takes it, not an abbreviation of vLLM's ``-pp``
    (which stopped the start blaming pipeline parallelism)."""
    args = build_parser().parse_args(["serve", "some/model", "-p", "3000"])
    assert args.port == 3000 and args.pipeline_parallel_size == 1


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


def test_a_served_process_leaves_what_loading_made_out_of_the_cyclic_gc(tmp_path: Path, tiny_model) -> None:
    """Each full collection walked every object torch, transformers and the model left (~0.2 s
    with the GIL held, the p99 of a busy server): once the app is built they are frozen, and what
    the collector still walks is what requests make."""
    script = (
        "import gc, json, sys\n"
        "from poolrag.cli import build_parser\n"
        "from poolrag.cli.serve import worker_app\n"
        "args = build_parser().parse_args(['serve', sys.argv[1], '--port', '0'])\n"
        "before = gc.get_freeze_count()\n"
        "worker_app(args)\n"
        "print(json.dumps([before, gc.get_freeze_count(), len(gc.get_objects())]))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tiny_model("bert"))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    before, frozen, walked = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == 0
    assert frozen > 50_000 and walked < frozen / 20, (frozen, walked)


@pytest.mark.parametrize("given", [["--api-key", ""], ["--api-key", "  "]])
def test_an_empty_api_key_stops_the_start_instead_of_turning_auth_off(
    minilm_path: Path, capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    """``--api-key "$POOLRAG_API_KEY"`` with the variable unset served every caller, silently."""
    assert main(["serve", str(minilm_path), "--port", "0", *given]) == 2
    err = capsys.readouterr().err
    assert err.startswith("poolrag serve: cannot start: --api-key is empty") and "\n" not in err.strip()


def test_connection_timing_flags_reach_the_settings_and_uvicorn(minilm_path: Path) -> None:
    """Keep-alive (5 s) and Retry-After (1 s) were fixed, and the drain window was --body-timeout:
    behind a load balancer with a 60 s idle timeout an operator could set none of them."""
    from poolrag.cli.serve import _served
    from poolrag.server.run import ANSWER_GRACE_S, uvicorn_config

    args = build_parser().parse_args(
        [
            "serve",
            str(minilm_path),
            "--timeout-keep-alive",
            "75",
            "--retry-after",
            "9",
            "--timeout-graceful-shutdown",
            "12",
        ]
    )
    settings, _ = _served(args)
    assert (settings.keep_alive_s, settings.retry_after_s, settings.drain_timeout_s) == (75, 9, 12)
    config = uvicorn_config(FastAPI(), settings)
    assert config.timeout_keep_alive == 75
    assert config.timeout_graceful_shutdown == round(12 + ANSWER_GRACE_S)


def test_serve_help_states_each_limits_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for says in (
        "After (default 256)",
        "per request (default 2048)",
        "(413; default 16777216",
        "413; default 33554432",
        "(default info)",
    ):
        assert says in help_text, says
