"""``poolrag serve`` takes a ``vllm serve`` line's flags: the same line, one word changed, serves."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import transformers
from decoders import vllm_templates
from decoders.tiny_decoders import TEXTS, build

from poolrag import Engine
from poolrag.cli import build_parser, main
from poolrag.cli.serve import engine_args_of
from poolrag.testing import engine_internals as internals

from .conftest import cli_server

QUERY = "What is a panda?"
OVERRIDES = '{"classifier_from_token": ["no", "yes"]}'


def test_vllm_flags_parse() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--model",
            "some/model",
            "--runner",
            "pooling",
            "--convert",
            "classify",
            "--score-template",
            "qwen3_reranker",
            "--quantization",
            "int8",
            "--pooler-config",
            '{"pooling_type": "LAST"}',
            "--hf-overrides",
            OVERRIDES,
            "--trust-remote-code",
            "--dtype",
            "float32",
            "--max-model-len",
            "512",
            "--served-model-name",
            "reranker",
        ]
    )
    assert (args.model, args.model_option) == (None, "some/model")
    assert (args.runner, args.convert, args.score_template, args.quantization) == (
        "pooling",
        "classify",
        "qwen3_reranker",
        "int8",
    )
    assert args.pooler_config == {"pooling_type": "LAST"} and args.max_model_len == 512


def test_generate_runner_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "some/model", "--runner", "generate"])
    assert exited.value.code == 2 and "pooling models only" in capsys.readouterr().err


def test_the_model_is_needed_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "--model MODEL" in capsys.readouterr().err
    assert main(["serve", "a/model", "--model", "b/model"]) == 2


def test_a_vllm_serve_line_serves_the_same_scores(tmp_path: Path) -> None:
    """``vllm serve --model M --runner pooling --convert classify --hf-overrides ... --score-template``."""
    folder = tmp_path / "qwen3-reranker"
    build(folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    offline = Engine(
        folder, convert="classify", score_template="qwen3_reranker", hf_overrides=json.loads(OVERRIDES)
    )
    expected = [s.outputs.score for s in offline.score(QUERY, TEXTS)]
    line = [
        "--model", str(folder), "--runner", "pooling", "--convert", "classify",
        "--hf-overrides", OVERRIDES, "--score-template", "qwen3_reranker",
        "--dtype", "float32", "--served-model-name", "reranker",
    ]  # fmt: skip
    with cli_server(tmp_path / "server.log", *line) as (url, _):
        body = {"model": "reranker", "text_1": QUERY, "text_2": TEXTS}
        response = httpx.post(f"{url}/score", json=body, timeout=60)
        assert response.status_code == 200, response.text
        served = [d["score"] for d in sorted(response.json()["data"], key=lambda d: d["index"])]
        np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-6)
        assert np.ptp(expected) > 1e-4
    assert '"POST /score HTTP/1.1" 200' in (tmp_path / "server.log").read_text()  # the access log is on


def test_both_spellings_of_multi_word_flags() -> None:
    """Issue 30, item 3: "``--hf_overrides`` (vLLM accepts ``_`` and ``-``) [is] refused"."""
    values = {
        "max-num-seqs": "4",
        "hf-overrides": OVERRIDES,
        "max-model-len": "128",
        "served-model-name": "reranker",
        "gpu-memory-utilization": "0.9",
        "tensor-parallel-size": "1",
        "chat-template": "t.jinja",
        "allowed-origins": '["http://app.example"]',
        "allowed-methods": '["GET", "POST"]',
        "allowed-headers": '["*"]',
    }
    switches = (
        "enforce-eager",
        "trust-remote-code",
        "disable-log-requests",
        "enable-prefix-caching",
        "allow-credentials",
    )

    def parse(sep: str) -> dict:
        line = ["serve", "some/model"]
        for name, value in values.items():
            line += [f"--{name.replace('-', sep)}", value]
        line += [f"--{name.replace('-', sep)}" for name in switches]
        return vars(build_parser().parse_args(line))

    dashed, underscored = parse("-"), parse("_")
    assert dashed == underscored
    assert dashed["max_num_seqs"] == 4 and dashed["hf_overrides"] == json.loads(OVERRIDES)
    assert dashed["enforce_eager"] and dashed["enable_prefix_caching"] and dashed["disable_log_requests"]
    assert dashed["allowed_origins"] == ("http://app.example",) and dashed["allow_credentials"]
    assert dashed["allowed_methods"] == ("GET", "POST") and dashed["allowed_headers"] == ("*",)


def test_vllm_flags_map_to_engine_options(minilm_path: Path) -> None:
    """``--max-num-seqs`` is the batcher's sequences per pass, ``--max-num-batched-tokens`` its token
    budget, ``--max-model-len`` the truncation bound; ``--enforce-eager`` leaves compile off."""
    line = [
        "serve", str(minilm_path), "--max-num-seqs", "3", "--max-num-batched-tokens", "1024",
        "--max-model-len", "32", "--enforce-eager", "--tensor-parallel-size", "1",
    ]  # fmt: skip
    engine = Engine.from_engine_args(engine_args_of(build_parser().parse_args(line)))
    batcher = internals.batcher(engine)
    assert (batcher.max_batch_size, batcher.max_batch_tokens) == (3, 1024)
    assert engine.max_model_len == 32 and engine.compile_report is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tensor-parallel-size", "2"], "parallelism is not supported"),
        (["-pp", "2"], "parallelism is not supported"),
        (["--data-parallel-size", "2"], "replicas run on Ray"),
        (["--enforce-eager", "--compile", "background"], "--enforce-eager contradicts --compile background"),
        (["--chat-template", "a.jinja", "--score-template", "qwen3_reranker"], "not both"),
    ],
)
def test_flags_poolrag_cannot_honour_stop_the_start(
    minilm_path: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(minilm_path), *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_vllm_serve_line_with_its_chat_template_and_engine_flags(tmp_path: Path) -> None:
    """Issue 30, items 2 and 3: "``poolrag serve --chat-template FILE`` is refused", and
    "``--gpu-memory-utilization``, ``--enforce-eager``, ``--max-num-seqs``, ``--tensor-parallel-size``,
    ``--hf_overrides`` ... are refused, so real ``vllm serve`` lines do not carry over". The line
    serves the scores of poolrag's shipped template, and the flags without effect get one warning."""
    folder = tmp_path / "qwen3-reranker"
    build(folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    offline = Engine(
        folder, convert="classify", score_template="qwen3_reranker", hf_overrides=json.loads(OVERRIDES)
    )
    expected = [s.outputs.score for s in offline.score(QUERY, TEXTS)]
    template = tmp_path / "qwen3_reranker.jinja"
    template.write_text(vllm_templates.QWEN3_RERANKER + "\n")
    line = [
        "--model", str(folder), "--runner", "pooling", "--convert", "classify",
        "--hf_overrides", OVERRIDES, "--chat-template", str(template),
        "--dtype", "float32", "--max_model_len", "512", "--max-num-seqs", "4", "--enforce-eager",
        "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.9", "--enable-prefix-caching",
        "--seed", "0", "--disable-log-requests", "--served-model-name", "reranker", "--async-scheduling",
        "--replicas", "2",  # poolrag's own flag, for --ray only: said, not silently ignored
    ]  # fmt: skip
    log = tmp_path / "server.log"
    with cli_server(log, *line) as (url, _):
        body = {"model": "reranker", "text_1": QUERY, "text_2": TEXTS}
        response = httpx.post(f"{url}/score", json=body, timeout=60)
        assert response.status_code == 200, response.text
        served = [d["score"] for d in sorted(response.json()["data"], key=lambda d: d["index"])]
        np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-6)
    text = log.read_text()
    warnings = [line for line in text.splitlines() if "no effect in poolrag" in line]
    assert len(warnings) == 1, text
    assert all(
        n in warnings[0]
        for n in ("gpu_memory_utilization", "enable_prefix_caching", "seed", "async_scheduling")
    )
    assert "max_num_seqs" not in warnings[0] and "enforce_eager" not in warnings[0]  # those are mapped
    assert 'POST /score HTTP/1.1" 200' in text  # --disable-log-requests leaves vLLM's access log on
    assert "--replicas 2 has no effect without --ray (one process serves)" in text


def test_vllm_api_key_in_the_environment_guards_the_server(minilm_path: Path, tmp_path: Path) -> None:
    """A deployment that hands ``vllm serve`` its key as ``VLLM_API_KEY`` (a Kubernetes secret) was
    served to every caller: the variable was not read. It is the key when ``--api-key`` and
    ``$POOLRAG_API_KEY`` are not given, as in vLLM."""
    key = "from-a-secret-4b1d"
    with cli_server(tmp_path / "server.log", str(minilm_path), env={"VLLM_API_KEY": key}) as (url, _):
        assert httpx.get(f"{url}/v1/models", timeout=30).status_code == 401
        bearer = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{url}/v1/models", headers=bearer, timeout=30).status_code == 200
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200  # probes stay open


def test_an_empty_vllm_api_key_stops_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty ``VLLM_API_KEY`` (a secret that did not resolve) stops the start in one line naming
    it, before the model is looked for, as an empty ``--api-key`` does, rather than serving without
    a key."""
    monkeypatch.delenv("POOLRAG_API_KEY", raising=False)
    monkeypatch.setenv("VLLM_API_KEY", "")
    assert main(["serve", str(tmp_path / "not-loaded"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("poolrag serve: cannot start: $VLLM_API_KEY is empty") and "\n" not in err.strip()


def test_an_override_the_weights_do_not_fit_stops_the_start_in_one_line(
    minilm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--hf-overrides '{"max_position_embeddings": 128}'`` on a 512-position checkpoint ended
    ``poolrag serve`` in transformers' RuntimeError traceback."""
    overrides = '{"max_position_embeddings": 128}'
    assert main(["serve", str(minilm_path), "--hf-overrides", overrides, "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("poolrag serve: cannot start: cannot load BertModel from"), err
    assert "mismatched" in err[-1] and "Traceback" not in "\n".join(err), err
