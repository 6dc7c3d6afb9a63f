"""Every subcommand takes the same engine flags (``EngineArgs.add_engine_flags``), and each flag name
means one thing everywhere: ``--quantization`` is the model's weights in ``serve`` and ``ingest``
alike, the index's compression is ``ingest --index-quantization`` (issue 28, item 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from poolrag.cli import build_parser, main
from poolrag.config.pooler_config import PoolerConfig
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError

MODEL = "some/model"
# each subcommand's line before the engine flags, the model named its own way
LINES = {
    "serve": ["serve", MODEL],
    "ingest": ["ingest", "docs/", "--model", MODEL],
    "ingest --ray": ["ingest", "docs/", "--model", MODEL, "--ray=auto"],
    "search": ["search", "a question", "--model", MODEL],
    "eval": ["eval", "beir/", "--model", MODEL],
    "tune": ["tune", MODEL],
}
FLAGS = [
    "--task", "embed", "--dtype", "bfloat16", "--device", "cpu", "--max-model-len", "128",
    "--max-num-batched-tokens", "2048", "--max-batch-size", "16", "--tokenizer", "tok/", "--revision", "v2",
    "--trust-remote-code", "--pooler-config", '{"pooling_type": "MEAN"}', "--hf-overrides",
    '{"is_matryoshka": true}', "--convert", "embed", "--score-template", "qwen3_reranker",
    "--device-map", "auto", "--quantization", "int8", "--cpu-fast-mode", "int8",
    "--cpu-fast-mode-min-cosine", "0.99", "--model-impl", "transformers", "--compile", "background",
    "--autotune", "off",
]  # fmt: skip
EXPECTED = EngineArgs(
    MODEL,
    task="embed",
    dtype="bfloat16",
    device="cpu",
    max_model_len=128,
    max_batch_tokens=2048,
    max_batch_size=16,
    tokenizer="tok/",
    revision="v2",
    trust_remote_code=True,
    pooler_config={"pooling_type": "MEAN"},
    hf_overrides={"is_matryoshka": True},
    convert="embed",
    score_template="qwen3_reranker",
    device_map="auto",
    quantization="int8",
    cpu_fast_mode="int8",
    cpu_fast_mode_min_cosine=0.99,
    model_impl="transformers",
    compile="background",
    tune="off",
)


#: ``poolrag tune`` always measures, so it has every engine flag but ``--autotune`` (by dest)
NOT_OFFERED = {"tune": {"autotune"}}


def parse(line: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(line)


def flags_and_expected(command: str, flags: list[str]) -> tuple[list[str], EngineArgs]:
    if command == "tune":
        at = flags.index("--autotune")
        return flags[:at] + flags[at + 2 :], EXPECTED.replace(tune=None)
    return flags, EXPECTED


@pytest.mark.parametrize("command", LINES)
def test_the_same_flags_parse_to_the_same_args_in_every_subcommand(command: str) -> None:
    flags, expected = flags_and_expected(command, FLAGS)
    assert EngineArgs.from_cli_args(parse(LINES[command] + flags), model=MODEL) == expected


@pytest.mark.parametrize("command", LINES)
def test_vllms_underscore_spellings_work_everywhere(command: str) -> None:
    underscored = [f.replace("-", "_").replace("__", "--", 1) if f.startswith("--") else f for f in FLAGS]
    flags, expected = flags_and_expected(command, underscored)
    assert EngineArgs.from_cli_args(parse(LINES[command] + flags), model=MODEL) == expected


@pytest.mark.parametrize("command", LINES)
def test_no_engine_flags_are_the_engines_defaults(command: str) -> None:
    """Except that a server starts eagerly (``--compile off``), as it did before this flag was shared."""
    args = EngineArgs.from_cli_args(parse(LINES[command]), model=MODEL)
    expected = EngineArgs(MODEL, compile="off") if command == "serve" else EngineArgs(MODEL)
    assert args == expected


def _engine_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def test_each_engine_flag_is_one_action_with_one_meaning_in_every_subcommand() -> None:
    reference = argparse.ArgumentParser()
    group = EngineArgs.add_engine_flags(reference)
    engine_flags = {s: a for a in group._group_actions for s in a.option_strings}
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        actions = _engine_actions(sub)
        for flag, want in engine_flags.items():
            if want.dest in NOT_OFFERED.get(name, ()):
                assert flag not in actions, f"poolrag {name} {flag}"
                continue
            got = actions[flag]
            assert (got.dest, got.choices, got.type, got.nargs, got.help) == (
                want.dest,
                want.choices,
                want.type,
                want.nargs,
                want.help,
            ), f"poolrag {name} {flag}"
            assert set(got.option_strings) == set(want.option_strings), f"poolrag {name} {flag}"
        # no flag of the command's own writes where an engine flag does
        engine_dests = {a.dest for a in engine_flags.values()}
        own = [a for a in sub._actions if a.dest in engine_dests and a.option_strings[0] not in engine_flags]
        assert not own, f"poolrag {name}: {[a.option_strings for a in own]}"


def test_quantization_is_the_weights_and_the_index_has_its_own_flag() -> None:
    ingest = parse(["ingest", "docs/", "--quantization", "int8", "--index-quantization", "binary"])
    serve = parse(["serve", MODEL, "--quantization", "int8"])
    assert EngineArgs.from_cli_args(ingest, model=MODEL).quantization == "int8"
    assert EngineArgs.from_cli_args(serve).quantization == "int8"
    assert ingest.index_quantization == "binary"


def test_the_old_index_spelling_is_one_line_naming_the_new_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ingest", "docs/", "--quantization", "binary"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert "--quantization" in err and "--index-quantization binary" in err


def test_ingest_says_once_that_quantization_now_means_the_weights(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An old ``ingest --quantization int8`` line (then: an int8 index) is not silently reinterpreted."""
    (tmp_path / "a.txt").write_text("a document")
    line = ["ingest", str(tmp_path / "a.txt"), "--uri", str(tmp_path / "s.db"), "--no-cache", "-q"]
    with caplog.at_level("WARNING", logger="poolrag.cli.ingest"):
        main([*line, "--model", str(tmp_path / "no-such-model"), "--quantization", "int8"])
    said = [r.getMessage() for r in caplog.records if r.name == "poolrag.cli.ingest"]
    assert len(said) == 1 and "model's weights" in said[0] and "--index-quantization" in said[0]


def test_a_value_argparse_cannot_judge_is_one_line_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.txt").write_text("a document")
    store = tmp_path / "store.db"
    line = ["ingest", str(tmp_path / "a.txt"), "--uri", str(store), "--no-cache", "-q"]
    assert main([*line, "--device", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "device 'bogus' is not a device torch knows" in err
    assert not store.exists()  # no store was opened, no model loaded


def test_tune_measures_now_and_no_compile_is_compile_off(capsys: pytest.CaptureFixture[str]) -> None:
    from poolrag.cli.tune import _engine_args

    assert _engine_args(parse(["tune", MODEL, "--no-compile"])) == EngineArgs(
        MODEL, tune="full", compile="off"
    )
    assert _engine_args(parse(["tune", MODEL])) == EngineArgs(MODEL, tune="full")
    with pytest.raises(SystemExit) as refused:  # it always measures: the choice is not offered
        main(["tune", MODEL, "--autotune", "off"])
    assert refused.value.code == 2
    assert "unrecognized arguments: --autotune off" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    shown = capsys.readouterr().out
    assert "--cpu-fast-mode" in shown and "--autotune" not in shown


def test_index_quantization_reaches_the_new_collection(minilm_path: Path, tmp_path: Path) -> None:
    from poolrag.stores import open_store

    (tmp_path / "a.txt").write_text("Pandas eat bamboo for most of the day.")
    store = tmp_path / "store.db"
    line = ["ingest", str(tmp_path / "a.txt"), "--model", str(minilm_path), "--uri", str(store)]
    assert main([*line, "--no-cache", "-q", "--index-quantization", "int8", "--autotune", "off"]) == 0
    opened = open_store("milvus", "poolrag", uri=str(store))
    try:
        spec = opened.read_spec()
    finally:
        opened.close()
    assert spec is not None and spec.quantization == "int8"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--task", "auto"], EngineArgs(MODEL)),  # vLLM's default: the model's own task
        (["--task", "embedding"], EngineArgs(MODEL, task="embed")),  # vLLM 0.6's name of embed
        (
            ["--override-pooler-config", '{"pooling_type": "MEAN"}'],
            EngineArgs(MODEL, pooler_config={"pooling_type": "MEAN"}),
        ),
        (
            ["--override_pooler_config", '{"normalize": false}'],
            EngineArgs(MODEL, pooler_config={"normalize": False}),
        ),
        (["--max-model-len", "1k"], EngineArgs(MODEL, max_model_len=1000)),
        (["--max-model-len", "1K"], EngineArgs(MODEL, max_model_len=1024)),
        (["--max-model-len", "0.5k"], EngineArgs(MODEL, max_model_len=500)),
        (["--max-model-len", "auto"], EngineArgs(MODEL)),
        (["--max-model-len", "-1"], EngineArgs(MODEL)),
        (["--max-num-batched-tokens", "16k"], EngineArgs(MODEL, max_batch_tokens=16000)),
        (["--max-batch-tokens", "8K"], EngineArgs(MODEL, max_batch_tokens=8192)),
    ],
)
@pytest.mark.parametrize("command", ["ingest", "tune"])
def test_vllm_spellings_of_engine_flag_values_parse_as_in_vllm(
    command: str, flags: list[str], expected: EngineArgs
) -> None:
    """A ``vllm serve`` line's values (``--max-model-len 32k``, ``--task auto``, the older
    ``--override-pooler-config``) were usage errors, so the line did not carry over."""
    assert EngineArgs.from_cli_args(parse(LINES[command] + flags), model=MODEL) == expected


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--pooling", "cls"], PoolerConfig(pooling_type="CLS")),
        (["--pooling", "mean"], PoolerConfig(pooling_type="MEAN")),
        (["--pooling", "last-token"], PoolerConfig(pooling_type="LAST")),
        (
            ["--pooling", "cls", "--pooler-config", '{"normalize": false}'],
            PoolerConfig("CLS", normalize=False),
        ),
    ],
)
@pytest.mark.parametrize("command", ["serve", "ingest"])
def test_teis_pooling_flag_is_the_pooler_configs_pooling_type(
    command: str, flags: list[str], expected: PoolerConfig
) -> None:
    """``text-embeddings-router --pooling cls`` carries over: it was an unknown flag here."""
    line = ["serve", MODEL] if command == "serve" else LINES[command]
    assert EngineArgs.from_cli_args(parse(line + flags), model=MODEL).pooler_config == expected


def test_teis_pooling_flag_and_a_pooler_config_that_disagree_are_refused() -> None:
    namespace = parse(LINES["ingest"] + ["--pooling", "cls", "--pooler-config", '{"pooling_type": "MEAN"}'])
    with pytest.raises(InvalidInputError, match="--pooling cls and --pooler-config's pooling_type MEAN"):
        EngineArgs.from_cli_args(namespace, model=MODEL)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--task", "generate"], "argument --task: poolrag serves pooling models only"),
        (["--max-model-len", "1.5K"], "argument --max-model-len"),
        (["--max-model-len", "0"], "argument --max-model-len"),
        (["--max-num-batched-tokens", "lots"], "not a token count: 'lots'"),
    ],
)
def test_vllm_values_poolrag_cannot_take_are_one_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(LINES["serve"] + flags)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and err.count("\n") == 1, err
