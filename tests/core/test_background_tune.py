"""A model's first load serves at once on the default path while its exact paths are timed in the
background, switches to the winner between batches, and caches the verdict as a foreground
measurement does.

Real engines on a tiny BERT (poolrag's native encoder serves by default, transformers' modules are
the other candidate). The measurement is held back by blocking the real load of the other
candidate until the test lets it go, and made to pick transformers by a real forward hook that
slows the native encoder down; no assertion reads a timing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import poolrag.core.autotune
import poolrag.core.background_tune
import poolrag.core.candidate_race
import poolrag.core.engine_build
from poolrag import Engine
from poolrag.core.autotune import PROGRESS_LOGGER
from poolrag.core.candidate_race import MIN_COSINE
from poolrag.testing import engine_internals as internals

TEXTS = [
    "short",
    "A sentence of medium length about choosing the fastest path.",
    "A considerably longer passage that keeps going, with several clauses, commas and words, so "
    "that the packed batch mixes lengths.",
]
WAIT_S = 600  # a ceiling for a busy machine, never reached when the feature works


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _served_impl(engine: Engine) -> str:
    return "native" if getattr(internals.loaded_module(engine), "native", False) else "transformers"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "poolrag"))
    monkeypatch.setattr(poolrag.core.autotune, "TIMING_TOKENS", 256)
    monkeypatch.setattr(poolrag.core.candidate_race, "TIMING_BUDGET_S", 0.5)
    monkeypatch.setattr(poolrag.core.background_tune, "SETTLE_S", 0.05)
    return tmp_path / "poolrag" / "tune"


class _HeldLoads:
    """Every model load the engine makes, by ``model_impl``; the load of transformers' modules (the
    candidate the measurement adds) waits until ``release`` is set."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldLoads]:
    loads = _HeldLoads()
    real = poolrag.core.engine_build.build_pipeline

    def build(*args: object, **kwargs: object):
        impl = str(kwargs["model_impl"])
        loads.made.append(impl)
        if impl == "transformers":
            loads.started.set()
            assert loads.release.wait(WAIT_S)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(poolrag.core.engine_build, "build_pipeline", build)
    yield loads
    loads.release.set()  # a failed test leaves no thread waiting


@pytest.fixture
def bert(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("bert")


@pytest.fixture
def static(bert: Path) -> np.ndarray:
    """The default path's vectors without tuning (what the first load serves meanwhile)."""
    return Engine(bert, tune="off").embed_array(TEXTS)


def test_the_first_load_answers_before_the_verdict_and_caches_it_after(
    cache: Path, held: _HeldLoads, bert: Path, static: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        engine = Engine(bert, tune="auto")
        assert engine.tune_report.state == "measuring"
        assert held.started.wait(WAIT_S)  # the measurement is under way, held in the candidate's load
        vectors = engine.embed_array(TEXTS)
        assert engine.tune_report.state == "measuring" and not list(cache.glob("*.json"))  # answered first
        np.testing.assert_allclose(vectors, static, atol=1e-6)  # the default path, untuned
        assert _served_impl(engine) == "native"

        held.release.set()
        report = engine.wait_for_tune(WAIT_S)
    assert report.state == "measured" and report.verdict is not None
    assert Path(report.path).is_file() and Path(report.path).parent == cache
    assert _served_impl(engine) == report.verdict.impl
    assert _cosines(static, engine.embed_array(TEXTS)).min() >= MIN_COSINE
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert len(lines) == 2, lines  # one says it measures, one what it chose: no more
    assert "in the background; serving on the default path meanwhile" in lines[0]
    assert lines[1].startswith("measured in ") and report.path in lines[1]

    held.made.clear()
    again = Engine(bert, tune="auto")
    assert again.tune_report.state == "cached" and again.tune_report.verdict == report.verdict
    assert held.made == [report.verdict.impl]  # the verdict is read: nothing measured, one load


def test_cached_uses_a_verdict_on_disk_and_measures_nothing_without_one(
    cache: Path, held: _HeldLoads, bert: Path, static: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    """``poolrag search``'s mode: its process ends before a measurement could, so it measures none
    (and says nothing), and it takes a verdict a longer-lived process measured."""
    held.made.clear()  # the untuned reference's load
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        engine = Engine(bert, tune="cached")
    assert engine.tune_report.state == "skipped" and "poolrag tune MODEL" in engine.tune_report.reason
    assert held.made == ["auto"] and not cache.exists()  # one load, the default path: nothing timed
    np.testing.assert_allclose(engine.embed_array(TEXTS), static, atol=1e-6)
    assert not [r for r in caplog.records if r.name == PROGRESS_LOGGER]
    held.release.set()
    measured = Engine(bert, tune="auto").wait_for_tune(WAIT_S)
    held.made.clear()
    again = Engine(bert, tune="cached")
    assert again.tune_report.state == "cached" and again.tune_report.verdict == measured.verdict
    assert held.made == [measured.verdict.impl]


def test_a_faster_path_takes_over_between_batches_while_requests_keep_coming(
    cache: Path, held: _HeldLoads, bert: Path, static: np.ndarray
) -> None:
    engine = Engine(bert, tune="auto")
    # the native encoder made slow with a real forward hook: transformers' modules win the race
    native = internals.loaded_module(engine)
    native.register_forward_pre_hook(lambda module, args: time.sleep(0.2))
    answers: list[np.ndarray] = []
    stop = threading.Event()

    def keep_asking() -> None:
        while not stop.is_set():
            answers.append(engine.embed_array(TEXTS))

    caller = threading.Thread(target=keep_asking)
    caller.start()
    try:
        held.release.set()
        report = engine.wait_for_tune(WAIT_S)
        after_switch, deadline = len(answers), time.monotonic() + WAIT_S
        while len(answers) < after_switch + 2 and caller.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # answers from the new path too
    finally:
        stop.set()
        caller.join(WAIT_S)
    verdict = report.verdict
    assert report.state == "measured" and verdict is not None and verdict.impl == "transformers"
    assert {c.impl: c.status for c in verdict.candidates} == {"native": "slower", "transformers": "chosen"}
    assert _served_impl(engine) == "transformers"
    assert internals.loaded_module(engine) is not native
    assert answers and all(_cosines(static, a).min() >= MIN_COSINE for a in answers)
    assert _cosines(static, engine.embed_array(TEXTS)).min() >= MIN_COSINE


WAITING = "is measuring this model on this machine: waiting for its verdict"


def _said(caplog: pytest.LogCaptureFixture, text: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not any(text in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_second_load_serves_while_the_first_measures_and_takes_its_verdict(
    cache: Path, held: _HeldLoads, bert: Path, static: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    """``poolrag serve --workers N`` loads one model in N processes at once: one measures, the rest
    serve on the default path and take its verdict, instead of N measurements slowing each other on
    the same cores. Two engines in one process wait for each other as two processes do."""
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        first = Engine(bert, tune="auto")
        assert held.started.wait(WAIT_S)  # first measures, held in its other candidate's load
        held.made.clear()
        second = Engine(bert, tune="auto")
        _said(caplog, WAITING)
        np.testing.assert_allclose(second.embed_array(TEXTS), static, atol=1e-6)  # serving meanwhile
        held.release.set()
        measured = first.wait_for_tune(WAIT_S)
        taken = second.wait_for_tune(WAIT_S)
    assert measured.state == "measured" and measured.verdict is not None
    assert taken.state == "cached" and taken.verdict == measured.verdict
    assert "another process" in taken.reason and taken.path == measured.path
    # the second loaded its default path and, where another won, the winner: nothing timed
    assert held.made == ["auto"] + ([] if measured.verdict.impl == "native" else ["transformers"])
    assert _served_impl(second) == measured.verdict.impl
    assert _cosines(static, second.embed_array(TEXTS)).min() >= MIN_COSINE
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert sum(WAITING in line for line in lines) == 1
    assert sum(line.startswith("another process measured in ") for line in lines) == 1


def test_a_measurement_that_ends_without_a_verdict_hands_the_turn_to_the_waiting_load(
    cache: Path, held: _HeldLoads, bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        first = Engine(bert, tune="auto")
        assert held.started.wait(WAIT_S)
        second = Engine(bert, tune="auto")
        _said(caplog, WAITING)
        first.close()  # its measurement ends unsaved: the turn goes with it
        held.release.set()
        assert first.wait_for_tune(WAIT_S).state == "skipped"
        report = second.wait_for_tune(WAIT_S)
    assert report.state == "measured" and Path(report.path).is_file()


def test_a_load_that_measures_before_serving_waits_for_the_measuring_one_and_reads_its_verdict(
    cache: Path,
    held: _HeldLoads,
    bert: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A load with a pinned compile (or a fast mode) measures before it returns: a second such load
    of the model waits for the first's verdict rather than racing the same candidates beside it."""
    monkeypatch.setattr(Engine, "_start_compile", lambda self: None)  # the compile is not the point
    engines: dict[str, Engine] = {}

    def load(name: str) -> None:
        engines[name] = Engine(bert, tune="auto", compile="background")

    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        first = threading.Thread(target=load, args=("first",))
        first.start()
        assert held.started.wait(WAIT_S)
        second = threading.Thread(target=load, args=("second",))
        second.start()
        _said(caplog, WAITING)
        assert second.is_alive()  # still in its constructor
        held.release.set()
        first.join(WAIT_S)
        second.join(WAIT_S)
    measured, read = engines["first"].tune_report, engines["second"].tune_report
    assert measured.state == "measured" and measured.verdict is not None
    assert read.state == "cached" and read.verdict == measured.verdict


def test_closing_the_engine_ends_the_measurement_without_a_verdict(
    cache: Path, held: _HeldLoads, bert: Path
) -> None:
    engine = Engine(bert, tune="auto")
    assert held.started.wait(WAIT_S)
    engine.close()
    held.release.set()
    report = engine.wait_for_tune(WAIT_S)
    assert report.state == "skipped" and "closed" in report.reason
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_dropping_the_engine_while_it_is_measured_stops_its_threads_and_the_measurement(
    cache: Path, held: _HeldLoads, bert: Path
) -> None:
    """``del engine`` is close(), as Engine.close says: the measuring thread holds the serving
    pipeline, and it kept the dropped engine's core, threads and model alive until the measurement
    ended (a notebook re-running ``Engine(...)`` on a first load piled up an engine per run)."""
    import gc

    def core_threads() -> int:
        return sum(t.name in ("poolrag-forward", "poolrag-post") for t in threading.enumerate())

    gc.collect()  # engines earlier tests dropped stop their threads now, not inside the count below
    before = core_threads()
    engine = Engine(bert, tune="auto")
    engine.embed_array(TEXTS)  # the core's threads run
    assert held.started.wait(WAIT_S)  # the measurement is under way, held in the candidate's load
    assert core_threads() == before + 2
    tune = engine._tune
    del engine
    gc.collect()
    assert core_threads() == before  # stopped while the measurement is still held
    held.release.set()
    report = tune.wait(WAIT_S)
    assert report.state == "skipped" and "closed" in report.reason
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_a_dropped_engines_model_is_freed_while_an_exit_still_waits_for_its_measurement(
    cache: Path, held: _HeldLoads, bert: Path
) -> None:
    """An exit waits for the measuring threads in ``_RUNNING``; a thread that freed a model after it
    had left that set did so while the interpreter finalized, and the process aborted ("terminate
    called without an active exception", exit 134). The measuring thread's frames let go of the
    dropped engine's model before the job leaves the set."""
    import gc
    import weakref

    engine = Engine(bert, tune="auto")
    engine.embed_array(TEXTS)
    assert held.started.wait(WAIT_S)
    tune = engine._tune
    freed_while_waited_for: list[bool] = []
    weakref.finalize(
        internals.loaded_module(engine),
        lambda: freed_while_waited_for.append(tune in poolrag.core.background_tune._RUNNING),
    )
    del engine
    gc.collect()
    held.release.set()
    tune.wait(WAIT_S)
    tune._thread.join(WAIT_S)
    gc.collect()
    assert freed_while_waited_for == [True]


@pytest.mark.parametrize(
    "pinned", [{"cpu_fast_mode": "auto"}, {"compile": "background"}], ids=["fast-mode", "pinned-compile"]
)
def test_a_fast_mode_or_a_pinned_compile_is_measured_before_the_engine_returns(
    cache: Path, bert: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, pinned: dict
) -> None:
    """Switching precision, or a compile already bound to the serving runner, cannot happen under
    a running engine: those loads measure first, and say so, then what they chose."""
    monkeypatch.setattr(Engine, "_start_compile", lambda self: None)  # the compile is not the point
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        engine = Engine(bert, tune="auto", **pinned)
    assert engine.tune_report.state == "measured"  # before the constructor returned
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert len(lines) == 2 and "timing its paths before serving" in lines[0]
    # fp32 where neither fast mode was faster, or none was timed
    chosen = engine.tune_report.verdict.fast_mode or "fp32"
    assert lines[1].startswith("measured in ") and f" {chosen} serves (saved to " in lines[1]


def test_a_model_loaded_while_a_background_tune_loads_its_other_path_gets_its_own_weights(
    cache: Path, bert: Path, tmp_path: Path, minilm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers builds a model under process-wide patches (its weights on the meta device until
    loaded): a second engine built meanwhile on the main thread (``poolrag serve A B``: B loads while
    A's first load times its other path) got meta tensors ("Cannot copy out of meta tensor"). Model
    construction is one at a time: B waits for the tune's load in flight, then loads whole."""
    import poolrag.loading.model_loader
    from poolrag.testing.tiny_models import build_splade

    splade = build_splade(tmp_path / "splade", minilm_path)
    reference = Engine(splade, tune="off").sparse_embed(TEXTS)
    inside, release = threading.Event(), threading.Event()
    real = poolrag.loading.model_loader.from_pretrained

    def from_pretrained(*args: object, **kwargs: object):
        if threading.current_thread().name == "poolrag-tune":  # the measurement's transformers load
            inside.set()
            assert release.wait(WAIT_S)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(poolrag.loading.model_loader, "from_pretrained", from_pretrained)
    first = Engine(bert, tune="auto")  # serves now, times transformers' modules behind
    assert inside.wait(WAIT_S)
    second: list[Engine] = []
    loading = threading.Thread(target=lambda: second.append(Engine(splade, tune="off")))
    loading.start()
    loading.join(1.0)
    assert loading.is_alive() and not second  # waiting for the tune's load in flight
    release.set()
    loading.join(WAIT_S)
    assert first.wait_for_tune(WAIT_S).state == "measured"
    for got, want in zip(second[0].sparse_embed(TEXTS), reference, strict=True):
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.values, want.values, rtol=1e-6)
