"""GET /metrics carries the autotune report: the chosen path and state as an info gauge, what
tuning cost, and each candidate's timing and agreement, as ``engine.tune_report`` has them.

A real engine tuned for real on a tiny BERT (tuning is off in the suite by default), served on
127.0.0.1 and scraped with httpx. No assertion reads a timing's size: which path wins depends on
the CPU; what must hold is that /metrics says what the engine measured and chose.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import poolrag.core.autotune
import poolrag.core.candidate_race
from poolrag import Engine

from .conftest import serve_in_thread


def _families(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every autotune sample, its ``model`` label checked to be the one served model's name and dropped."""
    served = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = dict(sample.labels)
            if sample.name.startswith("poolrag_autotune"):
                assert labels.pop("model") == served
            found.setdefault(sample.name, []).append((labels, sample.value))
    return found


def _candidate(labels: dict[str, str]) -> tuple[str, ...]:
    return tuple(labels[name] for name in ("impl", "forward", "precision", "status"))


@pytest.fixture
def tuned_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "poolrag"))
    monkeypatch.setattr(poolrag.core.autotune, "TIMING_TOKENS", 256)
    monkeypatch.setattr(poolrag.core.candidate_race, "TIMING_BUDGET_S", 0.5)
    return tmp_path


def test_a_measured_tuning_is_scraped_as_the_engine_reports_it(
    tuned_cache: Path, tiny_model: Callable[..., Path]
) -> None:
    engine = Engine(tiny_model("bert"), tune="auto")
    report = engine.wait_for_tune()  # a first load measures behind the default path
    verdict = report.verdict
    assert report.state == "measured" and verdict is not None
    with serve_in_thread(engine) as url:
        found = _families(url)

    assert found["poolrag_autotune_info"] == [
        ({"state": "measured", "impl": verdict.impl, "forward": verdict.forward, "fast_mode": ""}, 1.0)
    ]
    assert found["poolrag_autotune_seconds"] == [({}, pytest.approx(report.seconds))]
    assert found["poolrag_autotune_batch_tokens"] == [({}, float(verdict.batch_tokens))]
    timings = {_candidate(labels): value for labels, value in found["poolrag_autotune_candidate_seconds"]}
    cosines = {_candidate(labels): value for labels, value in found["poolrag_autotune_candidate_min_cosine"]}
    expected = {(c.impl, c.forward, c.precision, c.status): c for c in verdict.candidates}
    assert set(timings) == set(cosines) == set(expected) and len(expected) == 2
    for key, candidate in expected.items():
        assert timings[key] == pytest.approx(candidate.seconds)
        assert cosines[key] == pytest.approx(candidate.min_cosine)
    assert [key for key in expected if key[3] == "chosen"] == [
        (verdict.impl, verdict.forward, "fp32", "chosen")
    ]


def test_an_untuned_engine_says_off_and_lists_no_candidates(tiny_model: Callable[..., Path]) -> None:
    engine = Engine(tiny_model("bert"), tune="off")
    with serve_in_thread(engine) as url:
        found = _families(url)
    assert found["poolrag_autotune_info"] == [
        ({"state": "off", "impl": "", "forward": "", "fast_mode": ""}, 1.0)
    ]
    assert found["poolrag_autotune_seconds"] == [({}, 0.0)]
    assert "poolrag_autotune_candidate_seconds" not in found
    assert "poolrag_autotune_attention_min_rows_per_run" not in found


def test_a_native_encoder_s_attention_split_is_scraped(
    tuned_cache: Path, tiny_model: Callable[..., Path]
) -> None:
    engine = Engine(tiny_model("bert"), tune="auto", model_impl="native")
    verdict = engine.wait_for_tune().verdict
    assert verdict is not None and verdict.min_rows_per_run is not None
    with serve_in_thread(engine) as url:
        found = _families(url)
    assert found["poolrag_autotune_attention_min_rows_per_run"] == [({}, float(verdict.min_rows_per_run))]
