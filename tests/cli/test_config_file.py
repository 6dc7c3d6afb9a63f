"""``poolrag serve --config FILE`` reads vLLM's YAML config: each key a flag's long name, the command
line over the file over the defaults, and a file that is not one stops the start naming it.

A real server is started from a file alone and called over HTTP; the rest reads what the parser made
of a file, as ``poolrag serve`` receives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from poolrag.cli import build_parser, main
from poolrag.cli.config_file import with_config_file

START_S = 180
#: nine nested aliases of nine: 9**8 names from one line
ALIAS_BOMB = (
    "served-model-name: [&a [x,x,x,x,x,x,x,x,x]"
    + "".join(f", &{b} [{','.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefg", "bcdefgh", strict=True))
    + "]\n"
)


def _parsed(*argv: str):
    parser = build_parser()
    return with_config_file(parser, list(argv), parser.parse_args(list(argv)))


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_server_starts_from_a_vllm_config_file_alone(minilm_path: Path, tmp_path: Path) -> None:
    port = _free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"# as vllm serve --config reads it\nmodel: {minilm_path}\nhost: 127.0.0.1\nport: {port}\n"
        "served-model-name: [minilm, all-minilm]\nuvicorn-log-level: warning\n"
        "gpu-memory-utilization: 0.9\nautotune: 'off'\n"
    )
    command = [sys.executable, "-m", "poolrag.cli", "serve", "--config", str(config)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("POOLRAG_API_KEY", None)
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline, answer = time.monotonic() + START_S, None
        while answer is None:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
            except httpx.TransportError:
                time.sleep(0.2)
        assert [model["id"] for model in answer.json()["data"]] == ["minilm", "all-minilm"]
        embedded = httpx.post(
            f"http://127.0.0.1:{port}/v1/embeddings", json={"model": "all-minilm", "input": "hi"}, timeout=60
        )
        assert embedded.status_code == 200 and len(embedded.json()["data"][0]["embedding"]) == 384
    finally:
        process.terminate()
        process.wait(timeout=60)
    # a vLLM flag with no effect here is said as it is on the command line
    assert "no effect in poolrag" in log.read_text() and "gpu_memory_utilization" in log.read_text()


def test_the_command_line_wins_over_the_file_which_wins_over_the_defaults(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "model: from/file\nport: 9001\nserved_model_name: [a, b]\npooler-config: {pooling_type: MEAN}\n"
        "disable-fastapi-docs: true\nauto-truncate: false\nmax-queue: 7\n"
    )
    args = _parsed("serve", "--config", str(config))
    assert (args.model, args.port, args.served_model_name) == ("from/file", 9001, ["a", "b"])
    assert args.pooler_config == {"pooling_type": "MEAN"}
    assert args.disable_fastapi_docs is True and args.auto_truncate is False and args.max_queue == 7
    assert args.host == "127.0.0.1"  # not in the file: the default
    args = _parsed("serve", "cli/model", "--config", str(config), "--port", "9002", "--max-queue", "9")
    assert (args.model, args.port, args.max_queue, args.served_model_name) == (
        "cli/model",
        9002,
        9,
        ["a", "b"],
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("port: 8000\nnot-an-option: 1\n", "'not-an-option' is not a poolrag serve option"),
        ("disable-fastapi-docs: 'yes please'\n", "'disable-fastapi-docs' is a switch: give true or false"),
        ("port: [8000\n", "not YAML"),
        ("- port\n- 8000\n", "a mapping of option names to values, not a list"),
        ("port: eighty\n", "config.yaml: argument --port/-p: not an integer: 'eighty'"),
        (ALIAS_BOMB, "not YAML (aliases (*name) are not read here"),
        ("served-model-name: [" + ",".join(["n"] * 8_000_000) + "]\n", "larger than 1,048,576 bytes"),
        (b"served-model-name: [\xed\xa0\x80]\n", "cannot read it ('utf-8' codec can't decode"),
    ],
    ids=[
        "unknown-key",
        "switch-value",
        "broken-yaml",
        "not-a-mapping",
        "bad-value",
        "alias-bomb",
        "16-mb",
        "surrogate",
    ],
)
def test_a_file_that_is_not_a_serve_config_stops_the_start_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, says: str
) -> None:
    """Bounded too: no alias multiplies a short file into billions of values (a 275-byte file took
    817 MB before aliases were refused), and no file over 1 MiB is read."""
    config = tmp_path / "config.yaml"
    if isinstance(text, bytes):
        config.write_bytes(text)  # a lone surrogate's bytes: UTF-8 cannot carry one
    else:
        config.write_text(text)
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--config", str(config)])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--config", str(tmp_path / "nowhere.yaml")])
    assert (
        f"--config {tmp_path / 'nowhere.yaml'}: cannot read it (No such file or directory)"
        in capsys.readouterr().err
    )


def test_the_file_is_data_a_yaml_tag_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """YAML's safe loader: a ``!!python`` tag is refused as broken YAML, never constructed."""
    marker = tmp_path / "ran"
    config = tmp_path / "config.yaml"
    payload = json.dumps(f"open({str(marker)!r}, 'w')")
    config.write_text(f"port: !!python/object/apply:eval [{payload}]\n")
    with pytest.raises(SystemExit):
        main(["serve", "--config", str(config)])
    assert "not YAML" in capsys.readouterr().err and not marker.exists()
