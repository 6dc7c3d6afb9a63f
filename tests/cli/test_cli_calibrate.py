"""``poolrag calibrate``: each dimension's min and max over the user's texts, chunked and embedded as
``poolrag ingest`` embeds documents, saved per output width for ``serve --calibration``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.cli import main
from poolrag.postprocess.quantization_ranges import QuantizationRanges

TEXTS = [
    "Paris is the capital and largest city of France.",
    "The mitochondrion is the powerhouse of the cell, producing ATP.",
    "A hash table maps keys to values using a hash function.",
    "Bread is baked from flour, water, yeast and salt.",
    "The Pacific Ocean is the largest and deepest ocean on Earth.",
]
MATRYOSHKA = json.dumps({"matryoshka_dimensions": [16, 32]})


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "text": text}) + "\n" for i, text in enumerate(TEXTS)))
    return path


def _min_max(vectors: np.ndarray) -> np.ndarray:
    return np.vstack((vectors.min(axis=0), vectors.max(axis=0)))


def test_ranges_are_the_min_and_max_of_the_document_vectors_per_width(
    tiny_model: Callable[..., Path], corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tiny_model("bert")
    out = tmp_path / "ranges.json"
    args = ["calibrate", str(corpus), "--model", str(model), "--out", str(out), "--dimensions", "16"]
    assert main([*args, "--hf-overrides", MATRYOSHKA]) == 0
    assert f"wrote {out} (ranges for 16, 32 dimensions)" in capsys.readouterr().out
    ranges = QuantizationRanges.load(out)
    engine = Engine(str(model), hf_overrides=json.loads(MATRYOSHKA))
    assert ranges.model == engine.model_identity
    for width in (16, 32):
        vectors = engine.embed_array(TEXTS, PoolingParams(input_type="document", dimensions=width))
        np.testing.assert_array_equal(ranges.for_width(width), _min_max(vectors))


def test_a_bar_counts_the_chunks_embedded_for_every_width_and_quiet_draws_none(
    tiny_model: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sample of thousands of chunks is minutes of embedding: the bar (ingest's kind, on stderr)
    runs from 0 to the chunks times the widths, moving as pieces come back."""
    from poolrag.cli.calibrate import PROGRESS_PIECE

    chunks = PROGRESS_PIECE + 20  # two pieces per width
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"Short note number {i}."}) + "\n" for i in range(chunks)))
    out = tmp_path / "ranges.json"
    args = ["calibrate", str(corpus), "--model", str(tiny_model("bert")), "--out", str(out)]
    args += ["--dimensions", "16", "--hf-overrides", MATRYOSHKA]
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err.replace("\r", "\n")
    drawn = [tuple(map(int, m)) for m in re.findall(r"embedding: .*?\b(\d+)/(\d+)\b", err)]
    total = 2 * chunks
    assert drawn[0] == (0, total) and drawn[-1] == (total, total), err[-2000:]
    assert len({n for n, _ in drawn}) >= 3 and [n for n, _ in drawn] == sorted(n for n, _ in drawn)
    assert main([*args, "-q"]) == 0
    assert "embedding" not in capsys.readouterr().err


def test_max_chunks_keeps_a_seeded_sample_spread_over_every_chunk(
    tiny_model: Callable[..., Path], corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first chunks read calibrated a big corpus on its first folders only; the cap now keeps a
    sample of all of them, the same one on every run, and a small set is warned of."""
    from poolrag.cli.calibrate import spread_sample

    model = tiny_model("bert")
    out = tmp_path / "ranges.json"
    with caplog.at_level("WARNING", logger="poolrag.cli.calibrate"):
        code = main(["calibrate", str(corpus), "--model", str(model), "--out", str(out), "--max-chunks", "3"])
    assert code == 0
    kept = spread_sample(iter(TEXTS), 3)
    vectors = Engine(str(model)).embed_array(kept, PoolingParams(input_type="document"))
    np.testing.assert_array_equal(QuantizationRanges.load(out).for_width(32), _min_max(vectors))
    assert any("calibrating on 3 chunks" in r.getMessage() for r in caplog.records)
    many = [f"chunk {i}" for i in range(10_000)]
    sample = spread_sample(iter(many), 100)
    assert sample == spread_sample(iter(many), 100) and len(set(sample)) == 100
    assert max(int(text.split()[1]) for text in sample) > 5_000  # not the first hundred read
    assert spread_sample(iter(TEXTS), 10) == TEXTS


def test_a_file_ingest_leaves_out_is_left_out_and_listed_not_the_end_of_the_run(
    tiny_model: Callable[..., Path], corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder ``poolrag ingest`` took (one Latin-1 file listed as left out) stopped ``calibrate``
    at that file, exit 2, with nothing written; now it is left out and listed as ingest lists it,
    and the ranges are those of the files that were read."""
    (tmp_path / "legacy.txt").write_bytes("Crème brûlée, servie froide.".encode("latin-1"))
    out = tmp_path / "ranges.json"
    model = tiny_model("bert")
    assert main(["calibrate", str(tmp_path), "--model", str(model), "--out", str(out), "-q"]) == 0
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.out
    assert f"1 left out:\n  {tmp_path / 'legacy.txt'}: not UTF-8 text" in captured.err
    vectors = Engine(str(model)).embed_array(TEXTS, PoolingParams(input_type="document"))
    np.testing.assert_array_equal(QuantizationRanges.load(out).for_width(vectors.shape[1]), _min_max(vectors))


def test_fewer_than_two_chunks_is_one_line_and_exit_2(
    tiny_model: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.txt"
    one.write_text("A single short sentence.")
    out = tmp_path / "ranges.json"
    assert main(["calibrate", str(one), "--model", str(tiny_model("bert")), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("poolrag calibrate: error:") and "at least two chunks" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize("cap", ["1", "0"])
def test_a_cap_below_two_chunks_is_refused_as_the_flag_it_is(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cap: str
) -> None:
    """``--max-chunks 1`` was reported as "needs at least two chunks of text, found 1", blaming
    texts that held five; now the flag is refused, before any model loads."""
    args = [
        "calibrate",
        str(corpus),
        "--model",
        str(tmp_path / "no-model"),
        "--out",
        str(tmp_path / "r.json"),
    ]
    with pytest.raises(SystemExit) as exited:
        main([*args, "--max-chunks", cap])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--max-chunks: must be an integer of at least 2 (ranges need two chunks), got '{cap}'" in err
    assert "found" not in err


@pytest.mark.parametrize(("out", "problem"), [("nodir/x.json", "does not exist"), (".", "a folder")])
def test_an_out_that_cannot_be_written_is_refused_before_any_model_loads(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str, problem: str
) -> None:
    """It was found only after every chunk was embedded (minutes at the default 10,000)."""
    code = main(
        ["calibrate", str(corpus), "--model", str(tmp_path / "no-model"), "--out", str(tmp_path / out)]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("poolrag calibrate: error: --out") and problem in err and "\n" not in err


def test_a_missing_path_is_one_line(tiny_model: Callable[..., Path], tmp_path: Path, capsys) -> None:
    code = main(
        ["calibrate", str(tmp_path / "nowhere"), "--model", str(tiny_model("bert")), "--out", "x.json"]
    )
    assert code == 2
    assert "no such file or folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("width", "problem"),
    [
        ("16", "--dimensions 16: this model is not a Matryoshka model"),
        ("64", "--dimensions 64: dimensions must be between 1 and 32, got 64"),
    ],
)
def test_a_width_the_model_cannot_take_is_refused_before_any_text_is_read(
    tiny_model: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    width: str,
    problem: str,
) -> None:
    """It was found only after every chunk was embedded at full size (minutes at the default
    10,000); now before any file is read, so a path that does not exist is not reached."""
    model = tiny_model("bert")
    out = tmp_path / "ranges.json"
    code = main(
        [
            "calibrate",
            str(tmp_path / "nowhere"),
            "--model",
            str(model),
            "--out",
            str(out),
            "--dimensions",
            width,
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("poolrag calibrate: error:") and "\n" not in err
    assert problem in err and "no such file" not in err


def test_assume_matryoshka_calibrates_for_the_ingest_that_takes_the_same_flag(
    tiny_model: Callable[..., Path], corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """calibrate had no --assume-matryoshka, and its refusal told a command-line user to pass
    ``hf_overrides={"is_matryoshka": True}``, the Python form."""
    model = tiny_model("bert")
    out = tmp_path / "ranges.json"
    args = ["calibrate", str(corpus), "--model", str(model), "--out", str(out), "--dimensions", "16"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--dimensions 16: this model is not a Matryoshka model" in err
    assert "add --assume-matryoshka only if the model was trained for it" in err and "hf_overrides" not in err
    assert main([*args, "--assume-matryoshka"]) == 0
    engine = Engine(str(model), hf_overrides={"is_matryoshka": True})  # what ingest --assume-matryoshka loads
    assert QuantizationRanges.load(out).model == engine.model_identity
    vectors = engine.embed_array(TEXTS, PoolingParams(input_type="document", dimensions=16))
    np.testing.assert_array_equal(QuantizationRanges.load(out).for_width(16), _min_max(vectors))
