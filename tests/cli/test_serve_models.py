"""``poolrag serve``'s models: ``MODEL [MODEL ...]`` and ``--models-file``, validated into one
engine's options and one server's settings per model, every bad file a one-line error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from poolrag.cli import main
from poolrag.cli.serve_models import from_command_line, read_models_file
from poolrag.engine_args import EngineArgs
from poolrag.server import ServerSettings

BASE = EngineArgs("flags/model", dtype="float32", max_batch_size=8)
SETTINGS = ServerSettings(served_model_names=("default",), max_queue=32)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_gives_each_model_its_names_limits_and_engine_options(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        """
[[model]]
model = "org/embedder"
served_model_name = ["embedder", "e"]
max_queue = 4
max_inflight_tokens = 1000
max_answer_values = 5000

[[model]]
model = "org/reranker"
max_batch_size = 2
""",
    )
    embedder, reranker = read_models_file(path, BASE, SETTINGS)
    assert embedder.engine_args == BASE.replace(model="org/embedder")
    assert embedder.settings.served_model_names == ("embedder", "e")
    assert (embedder.settings.max_queue, embedder.settings.max_inflight_tokens) == (4, 1000)
    assert embedder.settings.max_answer_values == 5000
    assert reranker.settings.served_model_names == ("org/reranker",)  # a hub id as given
    assert reranker.settings.max_queue == 32  # the command line's
    assert reranker.engine_args.max_batch_size == 2 and reranker.engine_args.dtype == "float32"


def test_a_calibration_file_is_per_model_and_relative_to_the_models_file(tmp_path: Path) -> None:
    path = _file(
        tmp_path, '[[model]]\nmodel = "a/b"\ncalibration = "ranges/a.json"\n[[model]]\nmodel = "c/d"\n'
    )
    flags = ServerSettings(served_model_names=("default",), calibration="/srv/flag-ranges.json")
    first, second = read_models_file(path, BASE, flags)
    assert first.settings.calibration == str(tmp_path / "ranges" / "a.json")
    assert second.settings.calibration == "/srv/flag-ranges.json"  # the command line's --calibration


def test_several_models_on_the_command_line_take_one_name_each(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "my-reranker"
    folder.mkdir(parents=True)
    served = from_command_line(["org/embedder", str(folder)], None, BASE, SETTINGS)
    assert [one.settings.served_model_names for one in served] == [("org/embedder",), ("my-reranker",)]
    assert [one.engine_args.model for one in served] == ["org/embedder", str(folder)]
    named = from_command_line(["a/x", "b/y"], ["x", "y"], BASE, SETTINGS)
    assert [one.settings.served_model_names for one in named] == [("x",), ("y",)]
    with pytest.raises(ValueError, match="2 models need one name each, got 3"):
        from_command_line(["a/x", "b/y"], ["x", "y", "z"], BASE, SETTINGS)


def test_two_folders_named_alike_are_refused_saying_the_names_were_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``serve /srv/embed/model /srv/rerank/model``: the user gave no name, so "given to two models"
    does not say what happened; the error says both default to one name and how to name them."""
    embedder, reranker = tmp_path / "embed" / "model", tmp_path / "rerank" / "model"
    embedder.mkdir(parents=True)
    reranker.mkdir(parents=True)
    assert main(["serve", str(embedder), str(reranker), "--port", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"poolrag serve: cannot start: {embedder} and {reranker} are both served as 'model' by default "
        "(a folder by its last path component); name each with --served-model-name, one name per model"
    )
    named = from_command_line([str(embedder), str(reranker)], ["embedder", "reranker"], BASE, SETTINGS)
    assert [one.settings.served_model_names for one in named] == [("embedder",), ("reranker",)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[model]]\nmodel = "a/b"\nbatch = 4\n',
            "model 1: unknown key 'batch' (known: model, served_model_name",
        ),
        ('[[model]]\nmodel = "a/b"\n[[model]]\nmodel = "c/d"\ndtype = "float7"\n', "model 2: dtype"),
        ('[[model]]\nmodel = "a/b"\nmax_queue = 0\n', "model 1: max_queue must be at least 1"),
        ('[[model]]\nmodel = "a/b"\nmax_queue = "8"\n', "model 1: max_queue must be a whole number"),
        ('[[model]]\nserved_model_name = "x"\n', "model 1: 'model' must name a hub id or a model folder"),
        (
            '[[model]]\nmodel = "a/b"\nserved_model_name = []\n',
            "'served_model_name' must be a name or a list",
        ),
        ('[[model]]\nmodel = "a/b"\ntrust_remote_code = true\n', "trust_remote_code cannot be set in a file"),
        ('models = ["a/b"]\n', "unknown key 'models'; list models as [[model]] tables"),
        ("", "no [[model]] table"),
        ("[[model]\n", "not valid TOML"),
        ('[[model]]\nmodel = "a/b"\ncalibration = 3\n', "'calibration' must name a quantization ranges file"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ValueError) as caught:
        read_models_file(path, BASE, SETTINGS)
    assert str(caught.value).startswith(f"models file {path}")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_cli_refuses_a_bad_file_and_duplicate_names_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.toml"
    assert main(["serve", "--models-file", str(missing), "--port", "0"]) == 2
    assert f"models file {missing}: No such file or directory" in capsys.readouterr().err
    twice = _file(tmp_path, '[[model]]\nmodel = "a/b"\nserved_model_name = "m"\n')
    assert main(["serve", "c/d", "--served-model-name", "m", "--models-file", str(twice), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == "poolrag serve: cannot start: served model name 'm' is given to two models; give each its own"
    )
    assert main(["serve", "--served-model-name", "m", "--models-file", str(twice), "--port", "0"]) == 2
    assert "--served-model-name names MODEL arguments" in capsys.readouterr().err


def test_the_models_file_in_docs_server_md_is_valid(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```toml\n(.*?)^```$", page, re.M | re.S)
    embedder, reranker = read_models_file(_file(tmp_path, block), BASE, SETTINGS)
    assert embedder.settings.served_model_names == ("minilm", "embedder")
    assert (embedder.settings.max_queue, embedder.settings.max_inflight_tokens) == (64, 200000)
    assert reranker.settings.served_model_names == ("reranker",)
    assert reranker.engine_args.max_batch_tokens == 8192


def test_a_path_naming_no_folder_is_refused_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the first folder holds no model: had it been loaded first, its error would be the one said
    (tmp_path / "empty").mkdir()
    typo = tmp_path / "rerankr"
    assert main(["serve", str(tmp_path / "empty"), str(typo), "--port", "0"]) == 2
    assert (
        capsys.readouterr().err.strip() == f"poolrag serve: cannot start: model path '{typo}' is not a folder"
    )
    listed = _file(tmp_path, f'[[model]]\nmodel = "{typo}"\nserved_model_name = "r"\n')
    assert main(["serve", str(tmp_path / "empty"), "--models-file", str(listed), "--port", "0"]) == 2
    assert f"model path '{typo}' is not a folder" in capsys.readouterr().err
