"""``poolrag eval --tune [--save]`` against real Milvus Lite and Qdrant local mode, on the rare-term half of
``poolrag.testing.hybrid_dataset`` (where BM25 wins, so the tuned fusion is far from the default):
held-out metrics beside dense on the same queries, a record written only with ``--save``, read by
``poolrag search`` (its ranking equals the one with that fusion passed explicitly, and differs from the
default's), a bad record refused in one line, and ``kill -9`` mid-ingest and mid-tune leaving the
collection usable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.cli.eval import default_collection
from poolrag.ingest.checkpoint import checkpointed
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store
from poolrag.stores.base import METADATA_KEY
from poolrag.stores.hybrid import DEFAULT_FUSION, fusion_text
from poolrag.stores.retrieval_record import RetrievalRecord, saved_record
from poolrag.testing.rare_term_beir import write_rare_term_beir

K = 3
QUERIES = 30
SEARCHED = ["Which warehouse ships part", "Which team is", "pump controller part"]


def _where(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}


def _common(kind: str, root: Path, model: Path) -> list[str]:
    flag, value = next(iter(_where(kind, root).items()))
    return ["--store", kind, f"--{flag}", value, "--model", str(model), "--cache", str(root / "c.sqlite")]


def _eval_args(dataset: Path, common: list[str], *extra: str) -> list[str]:
    return ["eval", str(dataset), *common, "-k", str(K), "--chunk-tokens", "32", "-q", *extra]


def _eval(dataset: Path, common: list[str], capsys, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(_eval_args(dataset, common, *extra))
    out, err = capsys.readouterr()
    return code, out, err


def _open(kind: str, root: Path, dataset: Path):
    return open_store(kind, default_collection(str(dataset)), **_where(kind, root))


def _search_cli(
    kind: str, root: Path, dataset: Path, model: Path, query: str, capsys
) -> tuple[int, list, str]:
    flag, value = next(iter(_where(kind, root).items()))
    args = ["search", query, "--store", kind, f"--{flag}", value, "--model", str(model)]
    args += ["--collection", default_collection(str(dataset)), "--hybrid", "-k", str(K), "--json", "-v"]
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def _ranking(results) -> list[tuple[str, float]]:
    return [(r.id, round(r.score, 6)) for r in results]


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_tune_reports_held_out_metrics_and_only_save_writes_the_record_that_search_then_uses(
    kind: str, tmp_path: Path, minilm_path: Path, minilm_engine, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    dataset = write_rare_term_beir(tmp_path / "beir")
    common = _common(kind, tmp_path, minilm_path)

    code, out, err = _eval(dataset, common, capsys, "--modes", "hybrid", "--tune", "--json")
    assert code == 0, err
    printed = json.loads(out)
    assert list(printed) == ["dense", "hybrid", "tuned"]  # dense joins: tuning is judged against it
    tuned = printed["tuned"]
    names = {f"recall@{K}", f"mrr@{K}", f"ndcg@{K}"}
    assert names <= set(tuned) and set(tuned["dense"]) == names
    # Every query is held out once, so the tuned numbers sit beside dense on the very same queries.
    assert tuned["dense"] == pytest.approx(printed["dense"], abs=1e-12)
    assert tuned["queries"] == QUERIES and tuned["folds"] == 5 and tuned["seed"] == 0
    assert tuned["wins"] + tuned["ties"] + tuned["losses"] == QUERIES
    assert tuned[f"mrr@{K}"] > tuned["dense"][f"mrr@{K}"] + 0.2  # part numbers are BM25's game
    assert tuned["wins"] > tuned["losses"] and 0 < tuned["p_value"] < 0.01
    setting = RetrievalRecord.from_metadata("check", tuned["setting"])
    assert setting.fusion != DEFAULT_FUSION, "the set no longer separates the tuned setting from the default"
    store = _open(kind, tmp_path, dataset)
    assert saved_record(store.read_spec()) is None  # without --save nothing changes
    store.close()
    code, out, err = _eval(dataset, common, capsys, "--modes", "saved")
    assert code == 2 and "holds none: run poolrag eval --tune --save first" in err

    code, out, err = _eval(dataset, common, capsys, "--modes", "dense", "--tune", "--save")
    assert code == 0, err
    assert "(0 embedded now)" in out.splitlines()[0]
    assert f"{tuned['wins']} wins, {tuned['ties']} ties, {tuned['losses']} losses" in out
    assert "saved into the collection's record" in out
    store = _open(kind, tmp_path, dataset)
    record = saved_record(store.read_spec())
    assert record == setting

    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    retriever = Retriever(store, embedder, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
    explicit, default = {}, {}
    for query in SEARCHED:
        explicit[query] = _ranking(
            retriever.search(query, K, mode="hybrid", fusion=record.fusion, prefetch=record.prefetch)
        )
        default[query] = _ranking(
            retriever.search(query, K, mode="hybrid", fusion=DEFAULT_FUSION, prefetch=record.prefetch)
        )
        assert _ranking(retriever.search(query, K, mode="hybrid")) == explicit[query]  # Retriever reads it
    store.close()
    assert explicit != default
    # eval measures the saved setting too (tuned on one split, it is then reported on another), and
    # its table says the hybrid rows fuse by the default while search uses the record
    code, out, err = _eval(dataset, common, capsys, "--modes", "hybrid,saved", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows["saved"] != rows["hybrid"] and rows["saved"][f"mrr@{K}"] > rows["hybrid"][f"mrr@{K}"]
    code, out, err = _eval(dataset, common, capsys, "--modes", "hybrid")
    assert code == 0 and "holds a tuned setting" in out and "add saved to --modes" in out
    for query in SEARCHED:
        caplog.clear()
        with caplog.at_level("INFO", logger="poolrag.cli.search"):
            code, rows, err = _search_cli(kind, tmp_path, dataset, minilm_path, query, capsys)
        assert code == 0, err
        assert [(row["id"], round(row["score"], 6)) for row in rows] == explicit[query]
        said = f"hybrid: fused by {fusion_text(record.fusion)} with legs {record.prefetch} deep, the setting"
        assert said in caplog.text  # -v tells the user the tuning took


def test_save_needs_tune_and_the_fold_count_and_seed_are_checked(tmp_path: Path, capsys) -> None:
    dataset = write_rare_term_beir(tmp_path / "beir")
    where = ["--store", "qdrant", "--path", str(tmp_path / "q")]
    code, out, err = _eval(dataset, where, capsys, "--save")
    assert code == 2 and out == ""
    assert err.strip() == "poolrag eval: error: --save writes the setting --tune chooses: add --tune"
    code, _, err = _eval(dataset, where, capsys, "--tune", "--save", "--prefetch", "20000")
    assert code == 2 and "--prefetch 20000: a saved setting keeps legs of at most 10000" in err
    with pytest.raises(SystemExit):
        main(_eval_args(dataset, where, "--tune", "--folds", "1"))
    assert "--folds: must be an integer of at least 2, got '1'" in capsys.readouterr().err
    for seed in ["-1", "x"]:  # numpy seeds from whole numbers >= 0: a traceback, once the work was done
        with pytest.raises(SystemExit):
            main(_eval_args(dataset, where, "--tune", "--seed", seed))
        err = capsys.readouterr().err
        assert f"--seed: must be an integer of at least 0, got '{seed}'" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_a_bad_saved_record_is_refused_by_search_in_one_line(
    kind: str, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    dataset = write_rare_term_beir(tmp_path / "beir")
    code, _, err = _eval(dataset, _common(kind, tmp_path, minilm_path), capsys, "--modes", "dense")
    assert code == 0, err
    store = _open(kind, tmp_path, dataset)
    spec = json.loads(store.read_spec().to_metadata())
    spec["retrieval"] = {
        "version": 1,
        "fusion": "minmax",
        "sparse_weight": 7,
        "prefetch": 9,
        "rerank_weight": None,
    }
    if kind == "milvus":
        store._client.alter_collection_properties(store.collection, {METADATA_KEY: json.dumps(spec)})
    else:
        store._client.update_collection(store.collection, metadata={METADATA_KEY: json.dumps(spec)})
    store.close()
    code, rows, err = _search_cli(kind, tmp_path, dataset, minilm_path, SEARCHED[0], capsys)
    assert code == 2 and rows == []
    assert err.strip() == (
        f"poolrag search: error: collection {default_collection(str(dataset))!r} has a bad saved retrieval "
        "record: sparse_weight must be a number in [0, 1] for minmax, got 7; run 'poolrag eval --tune "
        "--save' again to replace it"
    )


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with log.open("w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "poolrag.cli", *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )


def _kill_when(proc: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"not killed {what} (exit {proc.returncode})"


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_kill_9_mid_ingest_and_mid_tune_leaves_a_collection_a_rerun_completes(
    kind: str, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    dataset = write_rare_term_beir(tmp_path / "beir")
    checkpoint = tmp_path / "eval.ckpt"
    log = tmp_path / "stderr.log"
    args = _eval_args(dataset, _common(kind, tmp_path, minilm_path), "--modes", "dense", "--tune", "--save")
    args += ["--batch-size", "8", "--checkpoint", str(checkpoint), "-v", "--json"]

    def ingested(count: int):
        return lambda: checkpoint.exists() and len(checkpointed(checkpoint)) >= count

    _kill_when(_start(args, log), ingested(2), "mid-ingest")
    done = len(checkpointed(checkpoint))
    assert 2 <= done < 150, done

    _kill_when(_start(args, log), lambda: "tune: legs of query 3/" in log.read_text(), "mid-tune")
    assert "saved {" not in log.read_text()  # killed before the save
    # (The database is not opened here: a Milvus Lite file stays locked by the process that opened it.)

    finished = _start(args, log)
    out, _ = finished.communicate(timeout=600)
    assert finished.returncode == 0, log.read_text()[-3000:]
    tuned = json.loads(out.strip().splitlines()[-1])["tuned"]
    assert tuned["queries"] == QUERIES
    code, rows, err = _search_cli(kind, tmp_path, dataset, minilm_path, SEARCHED[0], capsys)
    assert code == 0 and len(rows) == K, err
    store = _open(kind, tmp_path, dataset)
    assert saved_record(store.read_spec()) == RetrievalRecord.from_metadata("check", tuned["setting"])
    store.close()


@pytest.mark.real_weights
def test_tune_with_a_reranker_also_chooses_its_share_and_saves_it(
    tmp_path: Path, minilm_path: Path, assets: Path, capsys
) -> None:
    dataset = write_rare_term_beir(tmp_path / "beir")
    common = _common("qdrant", tmp_path, minilm_path)
    rerank = str(assets / "ms-marco-MiniLM-L-12-v2")
    code, out, err = _eval(
        dataset, common, capsys, "--modes", "dense", "--tune", "--save", "--rerank", rerank, "--json"
    )
    assert code == 0, err
    tuned = json.loads(out)["tuned"]
    assert tuned["setting"]["rerank_weight"] in (0.0, 0.25, 0.5, 0.75, 1.0)
    assert tuned["wins"] + tuned["ties"] + tuned["losses"] == QUERIES
    assert tuned[f"mrr@{K}"] > tuned["dense"][f"mrr@{K}"]
    store = _open("qdrant", tmp_path, dataset)
    assert saved_record(store.read_spec()) == RetrievalRecord.from_metadata("check", tuned["setting"])
    store.close()


@pytest.mark.parametrize(
    ("fusion", "rerank_weight", "p_value", "warned"),
    [
        (("minmax", 0.3), None, 0.77, True),
        (("minmax", 0.3), None, 0.004, False),
        (("minmax", 0.0), None, 0.77, False),
        (("minmax", 0.0), 0.0, 0.77, False),
        (("minmax", 0.0), 0.5, 0.77, True),
    ],
)
def test_a_choice_that_beat_dense_by_chance_is_said(
    fusion, rerank_weight: float | None, p_value: float, warned: bool
) -> None:
    """A setting is still chosen and saved on weak evidence (p = 0.77 on 60 queries), but the summary
    says so; a choice of dense alone (no sparse share, no reranker share) needs no warning, while the
    reranker on top of dense is a choice like any other."""
    from poolrag.cli.eval_tune import tuned_summary
    from poolrag.evaluation.tune import PairedComparison, Setting, TuneReport

    metrics = {f"mrr@{K}": 0.6}
    report = TuneReport(
        held_out=metrics,
        dense=metrics,
        comparison=PairedComparison(6, 48, 6, 0.001, p_value),
        record=RetrievalRecord(fusion, 50, rerank_weight),
        fold_settings=[Setting(fusion, rerank_weight)] * 5,
        objective=f"mrr@{K}",
        folds=5,
        seed=0,
        queries=60,
    )
    assert ("within chance (p >= 0.05)" in tuned_summary(report, saved=True)) is warned


@pytest.mark.parametrize("p_value", [0.01, 0.4])
def test_a_choice_that_lost_to_dense_held_out_is_said_whatever_the_p_value(p_value: float) -> None:
    """A setting that scores below dense on the queries it never saw (a sparse share fitted to these
    judgements) is said to have lost, pointing at dense, significant or not; a significant loss used to
    print no doubt at all, and a chance one only that it "may not help"."""
    from poolrag.cli.eval_tune import tuned_summary
    from poolrag.evaluation.tune import PairedComparison, Setting, TuneReport

    fusion = ("minmax", 0.25)
    report = TuneReport(
        held_out={f"mrr@{K}": 0.436},
        dense={f"mrr@{K}": 0.504},
        comparison=PairedComparison(5, 5, 9, -0.068, p_value),
        record=RetrievalRecord(fusion, 50, None),
        fold_settings=[Setting(fusion)] * 5,
        objective=f"mrr@{K}",
        folds=5,
        seed=0,
        queries=19,
    )
    summary = tuned_summary(report, saved=False)
    said = f"held out, the tuned setting did worse than dense alone (mrr@{K} 0.4360 against 0.5040)"
    assert said in summary
    assert "within chance" not in summary
