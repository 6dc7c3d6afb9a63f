"""The verdict file on its own: written atomically, read back equal, and anything that is not a
verdict for this exact key (another machine's, a hand-edited name, a non-number) is refused with
one warning instead of steering the load."""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import transformers

from poolrag.core.tune_verdicts import (
    MAX_VERDICT_BYTES,
    CandidateTiming,
    TuneKey,
    Verdict,
    read_verdict,
    write_verdict,
)

CPU = torch.device("cpu")


@pytest.fixture
def key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TuneKey:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path))
    return TuneKey.for_load("0123456789abcdef", {"dtype": "torch.float32", "max_batch_tokens": 4096}, CPU)


VERDICT = Verdict(
    impl="transformers",
    forward="compiled",
    fast_mode="bf16",
    compiled_measured=True,
    candidates=(
        CandidateTiming("native", "eager", "fp32", "slower", 0.25, 0.9999998),
        CandidateTiming("transformers", "compiled", "fp32", "chosen", 0.2, 0.9999997),
        CandidateTiming("native", "compiled", "fp32", "failed", None, None),
        CandidateTiming("transformers", "compiled", "bf16", "chosen", 0.1, 0.99993),
    ),
    batch_tokens=1952,
    passes=5,
    seconds=12.5,
    fast_reference_seconds=0.21,
)


def test_a_written_verdict_reads_back_equal(key: TuneKey) -> None:
    path = write_verdict(key, VERDICT)
    assert path == key.path() and path.is_file()
    assert not list(path.parent.glob("*.partial"))  # written whole, then renamed
    assert read_verdict(key) == VERDICT


def test_the_key_names_machine_torch_threads_and_settings(key: TuneKey) -> None:
    assert key.machine.startswith("cpu: ") and key.torch_version == torch.__version__
    # ATEN_CPU_CAPABILITY changes torch's kernels on the same CPU: another machine for a timing
    assert key.machine.endswith(f"; torch kernels {torch.backends.cpu.get_cpu_capability()}")
    assert (
        key.libraries.startswith("poolrag ") and f"transformers {transformers.__version__}" in key.libraries
    )
    assert replace(key, libraries="poolrag 0.0.1; transformers 4.0").path() != key.path()
    assert key.threads == torch.get_num_threads()
    other = TuneKey.for_load("0123456789abcdef", {"dtype": "torch.float32", "max_batch_tokens": 2048}, CPU)
    assert other.settings != key.settings and other.path() != key.path()
    assert replace(key, threads=key.threads + 1).path() != key.path()


def test_a_verdict_written_before_fast_forward_existed_reads_as_eager(key: TuneKey) -> None:
    path = write_verdict(key, replace(VERDICT, fast_forward="compiled"))
    assert path is not None and read_verdict(key) == replace(VERDICT, fast_forward="compiled")
    body = json.loads(path.read_text())
    del body["verdict"]["fast_forward"]
    path.write_text(json.dumps(body))
    assert read_verdict(key) == replace(VERDICT, fast_forward="eager")


def test_no_file_is_no_verdict_and_no_warning(key: TuneKey, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert read_verdict(key) is None
    assert not caplog.records


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda b: {**b, "format": "something-else"}, "not a poolrag-tune file"),
        (lambda b: {**b, "key": {**b["key"], "machine": "cpu: another CPU"}}, "written for another"),
        (lambda b: {**b, "verdict": {**b["verdict"], "forward": "cuda_graphs"}}, "forward is not one of"),
        (lambda b: {**b, "verdict": {**b["verdict"], "fast_mode": "fp4"}}, "fast_mode is not one of"),
        (lambda b: {**b, "verdict": {**b["verdict"], "fast_forward": "jit"}}, "fast_forward is not one of"),
        (lambda b: {**b, "verdict": {**b["verdict"], "seconds": float("nan")}}, "seconds is not a finite"),
        (lambda b: {**b, "verdict": {**b["verdict"], "passes": True}}, "passes is not a count"),
        (lambda b: {**b, "verdict": {**b["verdict"], "compiled_measured": "yes"}}, "compiled_measured"),
        (
            lambda b: {**b, "verdict": {**b["verdict"], "candidates": [{"impl": "native"}]}},
            "candidate 0 forward",
        ),
    ],
    ids=[
        "format",
        "foreign",
        "forward",
        "fast-mode",
        "fast-forward",
        "nan",
        "bool-count",
        "not-bool",
        "candidate",
    ],
)
def test_a_bad_field_is_refused_with_one_warning(
    key: TuneKey, caplog: pytest.LogCaptureFixture, edit, reason: str
) -> None:
    path = write_verdict(key, VERDICT)
    assert path is not None
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    with caplog.at_level(logging.WARNING, logger="poolrag.core.tune_verdicts"):
        assert read_verdict(key) is None
    assert len(caplog.records) == 1 and reason in caplog.records[0].getMessage()


def test_an_unwritable_cache_warns_and_loads_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning names the setting that keeps verdicts elsewhere (a read-only image's cache)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(blocker))  # the tune folder cannot be made under a file
    key = TuneKey.for_load("0123456789abcdef", {}, CPU)
    with caplog.at_level(logging.WARNING, logger="poolrag.core.tune_verdicts"):
        assert write_verdict(key, VERDICT) is None
    message = caplog.records[0].getMessage()
    assert len(caplog.records) == 1 and "not saved" in message and "POOLRAG_CACHE_DIR" in message


@pytest.mark.parametrize("thing", ["pipe", "huge"])
def test_a_path_that_is_no_verdict_file_is_ignored_without_reading_it(
    key: TuneKey, caplog: pytest.LogCaptureFixture, thing: str
) -> None:
    """A named pipe would block the load forever on a read; a huge file would be read whole."""
    path = key.path()
    path.parent.mkdir(parents=True, exist_ok=True)
    if thing == "pipe":
        os.mkfifo(path)
    else:
        path.write_bytes(b" " * (MAX_VERDICT_BYTES + 1))
    with caplog.at_level(logging.WARNING, logger="poolrag.core.tune_verdicts"):
        assert read_verdict(key) is None
    said = "not a regular file" if thing == "pipe" else "larger than any verdict"
    assert len(caplog.records) == 1 and said in caplog.records[0].getMessage()


def test_a_verdict_that_cannot_be_written_leaves_no_partial_file(key: TuneKey) -> None:
    key.path().mkdir(parents=True)  # a folder where the verdict would go: the rename fails
    assert write_verdict(key, VERDICT) is None
    assert [p.name for p in key.path().parent.iterdir()] == [key.path().name]


def test_two_writers_with_one_process_id_do_not_share_a_partial_file(
    key: TuneKey, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two containers sharing a cache folder both run as PID 1 (two engines of one process share a
    PID too): one writer finishing between the other's write and rename must not take its file."""
    written, finish = threading.Event(), threading.Event()
    rename = Path.replace

    def held_rename(self: Path, target: Path) -> Path:  # the first writer pauses before renaming
        if threading.current_thread().name == "first":
            written.set()
            finish.wait(30)
        return rename(self, target)

    monkeypatch.setattr(Path, "replace", held_rename)
    results: dict[str, Path | None] = {}
    first = threading.Thread(target=lambda: results.update(first=write_verdict(key, VERDICT)), name="first")
    with caplog.at_level(logging.WARNING, logger="poolrag.core.tune_verdicts"):
        first.start()
        assert written.wait(30)
        results["second"] = write_verdict(key, replace(VERDICT, passes=7))
        finish.set()
        first.join(30)
    assert results == {"first": key.path(), "second": key.path()}, caplog.text
    assert read_verdict(key) == VERDICT and caplog.text == ""
    assert [p.name for p in key.path().parent.iterdir()] == [key.path().name]
