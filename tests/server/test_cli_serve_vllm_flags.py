"""``poolrag serve`` takes a ``vllm serve`` line's flags: the same line, one word changed, serves."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import transformers
from decoders.tiny_decoders import TEXTS, build

from poolrag import Engine
from poolrag.cli import build_parser, main

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
