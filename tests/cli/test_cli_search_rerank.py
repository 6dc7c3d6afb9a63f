"""``poolrag search --rerank MODEL [--second-stage fuse|rrf|replace] [--rerank-weight W]``: the
printed scores are the fused second stage, recomputed here by hand from the printed stage scores
of every candidate (k covers the whole collection, so each query's normalisation is visible)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.cli import main
from poolrag.cli.search import SECOND_STAGES
from poolrag.retrieval.fusion import SecondStage

pytestmark = pytest.mark.real_weights

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
QUERY = "what makes the sea rise and fall"


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> list[str]:
    folder = tmp_path_factory.mktemp("search-rerank")
    common = ["--store", "qdrant", "--path", str(folder / "q"), "--collection", "docs"]
    common += ["--model", str(minilm_path), "--cache", str(folder / "c.sqlite")]
    sources = [str(SAMPLES / "nature"), str(SAMPLES / "cooking")]
    assert main(["ingest", *sources, "--quiet", *common]) == 0
    return common


def _search(common: list[str], assets: Path, capsys, *extra: str) -> list[dict]:
    capsys.readouterr()
    reranker = str(assets / "ms-marco-MiniLM-L-12-v2")
    args = ["search", QUERY, "-k", "100", "--candidates", "100", "--json", "--rerank", reranker]
    assert main([*args, *common, *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _z(values: list[float]) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    return (x - x.mean()) / x.std()


def _ranks(values: list[float]) -> np.ndarray:
    order = np.argsort(-np.asarray(values), kind="stable")
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.arange(1, len(values) + 1)
    return ranks


@pytest.mark.parametrize("weight", [None, "0.2"])
def test_fuse_is_the_default_and_mixes_z_scores(collection, assets: Path, capsys, weight: str | None) -> None:
    results = _search(collection, assets, capsys, *(["--rerank-weight", weight] if weight else []))
    assert len(results) > 5 and all(set(r["stages"]) == {"recall", "rerank", "fused"} for r in results)
    share = float(weight or 0.5)
    recall = [r["stages"]["recall"] for r in results]
    rerank = [r["stages"]["rerank"] for r in results]
    expected = (1 - share) * _z(recall) + share * _z(rerank)
    np.testing.assert_allclose([r["score"] for r in results], expected, atol=1e-6)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert results[0]["source"].endswith("nature/tides.txt")
    cross_encoder = Engine(assets / "ms-marco-MiniLM-L-12-v2")
    own = cross_encoder.score_array(QUERY, [r["text"] for r in results])
    np.testing.assert_allclose(rerank, own, atol=1e-6)


def test_rrf_fuses_the_ranks(collection, assets: Path, capsys) -> None:
    results = _search(collection, assets, capsys, "--second-stage", "rrf")
    recall = [r["stages"]["recall"] for r in results]
    rerank = [r["stages"]["rerank"] for r in results]
    expected = 1 / (60 + _ranks(recall)) + 1 / (60 + _ranks(rerank))
    np.testing.assert_allclose([r["score"] for r in results], expected, atol=1e-12)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_replace_ranks_by_the_reranker_alone(collection, assets: Path, capsys) -> None:
    results = _search(collection, assets, capsys, "--second-stage", "replace")
    assert all(set(r["stages"]) == {"recall", "rerank"} for r in results)
    assert [r["score"] for r in results] == [r["stages"]["rerank"] for r in results]
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_second_stage_options_need_a_reranker_and_a_weight_in_0_1(collection, capsys) -> None:
    assert main(["search", QUERY, "--second-stage", "rrf", *collection]) == 2
    assert "--second-stage and --rerank-weight need --rerank MODEL" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["search", QUERY, "--rerank", "x", "--rerank-weight", "1.5", *collection])
    assert exc.value.code == 2
    assert "--rerank-weight: must be a number from 0 to 1, got 1.5" in capsys.readouterr().err


def test_the_cli_offers_exactly_the_libraries_second_stages() -> None:
    assert tuple(mode.value for mode in SecondStage) == SECOND_STAGES
