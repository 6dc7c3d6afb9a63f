"""``Engine(..., compile="background")``: eager serves at once, the compiled forward is swapped in
between batches once it matches eager, its artifacts are reused from disk by the next engine, and
a compile that fails or disagrees leaves eager in place with the reason.

Real engines on a tiny BERT (poolrag's native encoder), real inductor; each test points poolrag's
and inductor's caches at its own folders so that "from disk" means this test's disk.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import poolrag.compile.background
from poolrag import Engine
from poolrag.compile.background import DEFAULT_MIN_COSINE, BackgroundCompile
from poolrag.loading.cpu_fast_mode import probe_requests
from poolrag.models.int8_linear import int8_activation_levels
from poolrag.testing import engine_internals as internals

TEXTS = [
    "short",
    "A sentence of medium length about compiling and batching.",
    "A considerably longer passage that keeps going, with several clauses, commas and words, so "
    "that the packed batch mixes lengths and attention runs more than one block.",
    "Another one.",
    "short",
]
WAIT_S = 600


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _use_caches(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(root / "poolrag"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    torch._dynamo.reset()  # nothing compiled by an earlier test is reused in memory


@pytest.fixture(scope="module")
def compiled(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Callable[..., Path]
) -> Iterator[tuple[Engine, np.ndarray, Path]]:
    """An engine whose background compile finished, the eager vectors of TEXTS, the cache root."""
    root = tmp_path_factory.mktemp("compile-cache")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _use_caches(monkeypatch, root)
        engine = Engine(tiny_model("bert"), compile="background")
        report = engine.compile_report
        assert report is not None and report.state in ("compiling", "active")
        eager = engine.embed_array(TEXTS)  # served at once, whatever the compile is doing
        engine.wait_for_compile(WAIT_S)
        yield engine, eager, root


def test_background_compile_swaps_in_the_compiled_forward(compiled: tuple[Engine, np.ndarray, Path]) -> None:
    engine, eager, _ = compiled
    report = engine.compile_report
    assert report is not None
    assert report.state == "active", report.reason
    assert report.source == "compiled" and report.graph == "native-packed"
    assert report.min_cosine is not None and report.min_cosine >= DEFAULT_MIN_COSINE
    assert Path(report.cache_path).is_file()
    runner = internals.runner(engine)
    assert runner.compiled
    after = engine.embed_array(TEXTS)
    assert _cosines(eager, after).min() >= DEFAULT_MIN_COSINE
    runner.install_compiled(None)  # back to eager: the very vectors served before the swap
    try:
        np.testing.assert_array_equal(engine.embed_array(TEXTS), eager)
    finally:
        runner.install_compiled(None)


def test_next_engine_loads_the_compiled_code_from_disk(
    compiled: tuple[Engine, np.ndarray, Path],
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Callable[..., Path],
) -> None:
    _, eager, root = compiled
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(root / "poolrag"))
    monkeypatch.setenv(
        "TORCHINDUCTOR_CACHE_DIR", str(root / "inductor-empty")
    )  # only poolrag's file can help
    torch._dynamo.reset()
    engine = Engine(tiny_model("bert"), compile="background")
    report = engine.wait_for_compile(WAIT_S)
    assert report is not None and report.state == "active", report
    assert report.source == "disk cache" and report.cache_hits >= 1
    assert _cosines(eager, engine.embed_array(TEXTS)).min() >= DEFAULT_MIN_COSINE


def test_code_from_torchs_own_cache_is_named_so_and_kept_in_poolrags(
    compiled: tuple[Engine, np.ndarray, Path],
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Callable[..., Path],
) -> None:
    """Inductor's cache (warm from the first engine) had the code, poolrag's is empty: not
    'reused' (that is this process's own earlier compile), and poolrag's cache gets the bundle, so
    the next process needs neither torch's cache nor a compile."""
    _, _, root = compiled
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(root / "poolrag-empty"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    torch._dynamo.reset()
    engine = Engine(tiny_model("bert"), compile="background")
    report = engine.wait_for_compile(WAIT_S)
    assert report is not None and report.state == "active", report
    assert report.source == "inductor cache" and report.cache_hits >= 1
    assert Path(report.cache_path).is_file()


def test_a_cache_that_cannot_take_the_bundle_keeps_the_compiled_forward(
    compiled: tuple[Engine, np.ndarray, Path],
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Callable[..., Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A read-only image's or a full disk's cache: the bundle is not saved (a warning says so), and the
    forward compiled in this process serves all the same."""
    _, eager, root = compiled
    blocked = root / "poolrag-cache-is-a-file"
    blocked.write_text("")  # no folder can be made below it, as on a read-only mount
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(blocked / "poolrag"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))  # warm: a bundle to save
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="poolrag.compile"):
        engine = Engine(tiny_model("bert"), compile="background")
        report = engine.wait_for_compile(WAIT_S)
    assert report is not None and report.state == "active", report
    assert internals.runner(engine).compiled
    assert f"compile cache {report.cache_path} not saved" in caplog.text
    assert _cosines(eager, engine.embed_array(TEXTS)).min() >= DEFAULT_MIN_COSINE


def test_compile_below_the_bar_keeps_eager_and_says_why(compiled: tuple[Engine, np.ndarray, Path]) -> None:
    engine, eager, _ = compiled
    runner = internals.runner(engine)
    runner.install_compiled(None)
    probe = probe_requests(internals.processor(engine))
    # no output can reach a cosine above 1: the gate must refuse the (correct) compiled forward
    report = BackgroundCompile(runner, probe, engine.model_identity, min_cosine=1.5).start().wait(WAIT_S)
    assert report.state == "eager" and "differ from eager" in report.reason
    assert not runner.compiled
    np.testing.assert_array_equal(engine.embed_array(TEXTS), eager)


def test_failing_compile_keeps_eager_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Callable[..., Path]
) -> None:
    _use_caches(monkeypatch, tmp_path)
    blocked = tmp_path / "inductor-cache-is-a-file"
    blocked.write_text("")  # inductor cannot write its generated code: a real compile failure
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(blocked))
    path = tiny_model("bert", intermediate_size=41)
    engine = Engine(path, compile="background")
    report = engine.wait_for_compile(WAIT_S)
    assert report is not None and report.state == "eager", report
    assert report.reason.startswith("compile failed")
    assert not internals.runner(engine).compiled
    np.testing.assert_array_equal(engine.embed_array(TEXTS), Engine(path).embed_array(TEXTS))


def test_swap_waits_for_the_batch_in_flight(compiled: tuple[Engine, np.ndarray, Path]) -> None:
    engine, _, _ = compiled
    runner = internals.runner(engine)
    runner.install_compiled(None)
    probe = probe_requests(internals.processor(engine))
    swapped = threading.Event()
    with runner._batch_lock:  # what a batch holds from its first layer to its last
        job = BackgroundCompile(runner, probe, engine.model_identity)
        threading.Thread(target=lambda: (job.start().wait(WAIT_S), swapped.set()), daemon=True).start()
        assert not swapped.wait(2.0)  # verified, but the swap waits for the batch
        assert not runner.compiled
    assert swapped.wait(WAIT_S)
    assert job.report.state == "active" and runner.compiled


def test_unknown_compile_mode_is_refused(tiny_model: Callable[..., Path]) -> None:
    from poolrag.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="compile"):
        Engine(tiny_model("bert"), compile="eager-please")


def test_a_converted_classifier_stays_eager_and_says_why(tiny_model: Callable[..., Path]) -> None:
    """token_classify with convert='classify' reads hidden states the compiled graph never returns."""
    folder = tiny_model("bert", head="sequence", num_labels=3)
    engine = Engine(folder, convert="classify", compile="background")
    report = engine.wait_for_compile(WAIT_S)
    assert report is not None and report.state == "eager"
    assert "token_classify" in report.reason
    assert not internals.runner(engine).compiled
    assert len(engine.token_classify(["a b c"])[0].outputs.data) == len(engine.tokenize("a b c"))


def test_a_dropped_engines_model_is_freed_while_an_exit_still_waits_for_its_compile(
    monkeypatch: pytest.MonkeyPatch, tiny_model: Callable[..., Path]
) -> None:
    """An exit waits for the compile threads in ``_RUNNING``; a thread that freed a model after it
    had left that set did so while the interpreter finalized, and the process aborted ("terminate
    called without an active exception", exit 134). The job lets go of a dropped engine's runner
    before it leaves the set. (A converted classifier: no graph to compile, the job ends at once.)"""
    started, release = threading.Event(), threading.Event()
    real = poolrag.compile.background._plan

    def held_plan(runner: object) -> object:
        started.set()
        assert release.wait(WAIT_S)
        return real(runner)  # type: ignore[arg-type]

    monkeypatch.setattr(poolrag.compile.background, "_plan", held_plan)
    classifier = tiny_model("bert", head="sequence", num_labels=3)
    engine = Engine(classifier, convert="classify", compile="background")
    assert started.wait(WAIT_S)
    assert engine._compile is not None
    job, thread = weakref.ref(engine._compile), engine._compile._thread
    freed_while_waited_for: list[bool] = []
    weakref.finalize(
        internals.loaded_module(engine),
        lambda: freed_while_waited_for.append(job() in poolrag.compile.background._RUNNING),
    )
    del engine
    gc.collect()
    release.set()
    thread.join(WAIT_S)
    gc.collect()
    assert freed_while_waited_for == [True]


@pytest.mark.skipif(int8_activation_levels() is None, reason="this PyTorch build has no oneDNN int8 matmul")
def test_int8_fast_mode_compiles_with_its_quantisation_fused_and_keeps_its_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm_path: Path
) -> None:
    """The int8 graph is compiled (its own cache key), held to what keeps the fast mode's bar to fp32
    rather than to exactness with eager int8, and still meets that bar against fp32 once swapped in."""
    _use_caches(monkeypatch, tmp_path)
    engine = Engine(minilm_path, cpu_fast_mode="int8", compile="background")
    fast = engine.fast_mode_report
    assert fast is not None
    report = engine.wait_for_compile(WAIT_S)
    assert report is not None
    if not fast.active:  # below the bar on this CPU: exact fp32 serves and compiles as usual
        assert report.graph == "native-packed" and report.state == "active", report
        return
    assert report.graph == "native-packed-int8"  # not the exact graph's artifacts (the key names it)
    assert report.min_cosine is not None
    if report.state == "active":
        assert report.min_cosine >= fast.compiled_min_cosine()
        assert internals.runner(engine).compiled
    else:  # eager int8 met the bar with too little to spare for the graph's own drift (AVX2 kernels)
        assert report.min_cosine < fast.compiled_min_cosine() and "min cosine" in report.reason
        assert not internals.runner(engine).compiled
    exact = Engine(minilm_path).embed_array(TEXTS)
    assert _cosines(exact, engine.embed_array(TEXTS)).min() >= fast.min_cosine_required


def test_a_process_that_exits_while_compiling_exits_cleanly_and_keeps_what_it_generated(
    tmp_path: Path, tiny_model: Callable[..., Path]
) -> None:
    """A short-lived process (``poolrag ingest --compile background``, any command whose verdict
    chose a compiled path) ends while its compile runs: it waits for the step in flight instead of
    leaving the compile thread inside torch as the interpreter is torn down (that aborted: exit 134,
    "terminate called without an active exception", two exits in three), and reports nothing of a
    compile the exit stopped."""
    script = (
        "import logging, sys, time\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from poolrag import Engine\n"
        "engine = Engine(sys.argv[1], compile='background', tune='off')\n"
        "engine.embed_array(['a cat', 'a longer sentence about a dog'])\n"
        "time.sleep(float(sys.argv[2]))\n"
    )
    model = tiny_model("bert")
    for run, pause in enumerate((0.0, 1.0, 2.0)):
        env = {
            **os.environ,
            "POOLRAG_CACHE_DIR": str(tmp_path / f"poolrag-{run}"),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"inductor-{run}"),
        }
        done = subprocess.run(
            [sys.executable, "-c", script, str(model), str(pause)],
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        assert done.returncode == 0, (pause, done.returncode, done.stderr[-3000:])
        assert "terminate called" not in done.stderr
        assert "compiled forward not used" not in done.stderr, done.stderr[-3000:]
        assert "stopping the background compile before exiting" in done.stderr
