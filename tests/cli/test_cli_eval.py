"""``poolrag eval DATASET`` on a tiny BEIR folder written by the test, against real Milvus Lite and Qdrant
local mode: the printed metrics equal a hand computation from the retriever's own outputs over the
collection the command filled, a second run embeds nothing, and user mistakes are one line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.cli.eval import default_collection
from poolrag.evaluation import BeirDataset
from poolrag.evaluation.metrics import evaluate
from poolrag.ingest.sparse_encoders import bm25_for_model
from poolrag.retrieval import CrossEncoderReranker, Retriever
from poolrag.sparse import WordAnalyzer
from poolrag.stores import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))
from test_eval_run import DOCS, QUERIES, by_document, hand_metrics, write_dataset

K = 3


def _location(kind: str, root: Path) -> list[str]:
    return ["--uri", str(root / "m.db")] if kind == "milvus" else ["--path", str(root / "q")]


def _common(kind: str, root: Path, model: Path) -> list[str]:
    return [*_location(kind, root), "--store", kind, "--model", str(model), "--cache", str(root / "c.sqlite")]


def _eval(dataset: Path, common: list[str], capsys, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["eval", str(dataset), *common, "-k", str(K), "--chunk-tokens", "32", "-q", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _hand(kind: str, root: Path, engine: Engine, modes: dict[str, CrossEncoderReranker | None], depth: int):
    where = {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}
    store = open_store(kind, default_collection(str(root / "beir")), **where)
    try:
        embedder = CachedEmbedder(engine, EmbeddingCache(root / "c.sqlite"))
        sparse = bm25_for_model(engine.tokenizer, engine.facts.model_identity)
        metrics = {}
        for mode, reranker in modes.items():
            retriever = Retriever(store, embedder, reranker=reranker, sparse_encoder=sparse)
            base = "hybrid" if reranker is not None else mode
            # reranked over the candidates poolrag search --rerank -k K reranks by default
            extra = {"candidates": max(10 * K, 50)} if reranker is not None else {}
            run = {q: by_document(retriever.search(t, depth, mode=base, **extra)) for q, t in QUERIES.items()}
            metrics[mode] = hand_metrics(run, K)
        return metrics
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_eval_prints_hand_computed_metrics_and_a_second_run_embeds_nothing(
    kind: str, tmp_path: Path, minilm_path: Path, minilm_engine, capsys
) -> None:
    dataset = write_dataset(tmp_path / "beir")
    common = _common(kind, tmp_path, minilm_path)
    code, out, err = _eval(dataset, common, capsys, "--json")
    assert code == 0, err
    printed = json.loads(out)
    assert list(printed) == ["dense", "sparse", "hybrid"]
    assert all(set(values) == {f"recall@{K}", f"mrr@{K}", f"ndcg@{K}"} for values in printed.values())
    # Two documents are longer than a chunk: each query takes 3k chunks so k documents remain.
    hand = _hand(kind, tmp_path, minilm_engine, dict.fromkeys(printed), 3 * K)
    _assert_close(printed, hand)

    runs_dir = tmp_path / "runs"
    code, out, err = _eval(dataset, common, capsys, "--modes", "hybrid,dense", "--save-runs", str(runs_dir))
    assert code == 0, err
    lines = out.splitlines()
    assert "corpus: 8 documents" in lines[0] and "(0 embedded now)" in lines[0]
    assert lines[0].endswith(f"in collection {default_collection(str(dataset))!r}")  # the name search takes
    assert [line.split()[0] for line in lines[2:]] == ["hybrid", "dense"]
    assert float(lines[2].split()[2]) == pytest.approx(printed["hybrid"][f"mrr@{K}"], abs=5e-5)
    # the runs as TREC files, rescored here to the metrics printed
    assert sorted(p.name for p in runs_dir.iterdir()) == ["run.dense.trec", "run.hybrid.trec"]
    for mode in ("hybrid", "dense"):
        run: dict[str, list[tuple[str, float]]] = {}
        for line in (runs_dir / f"run.{mode}.trec").read_text().splitlines():
            query, q0, doc, rank, score, tag = line.split()
            assert q0 == "Q0" and tag == f"poolrag-{mode}" and int(rank) == len(run.setdefault(query, [])) + 1
            run[query].append((doc, float(score)))
        qrels = BeirDataset(dataset).judged_queries()[1]
        _assert_close({mode: evaluate(run, qrels, (K,))}, {mode: printed[mode]})


def test_each_analyzer_gets_its_own_recorded_collection(tmp_path: Path, minilm_path: Path, capsys) -> None:
    dataset = write_dataset(tmp_path / "beir")
    common = _common("qdrant", tmp_path, minilm_path)
    runs = {}
    for flags in ([], ["--analyzer", "words"], ["--analyzer", "words", "--language", "german"]):
        code, out, err = _eval(dataset, common, capsys, "--json", "--modes", "sparse", *flags)
        assert code == 0, err
        runs[tuple(flags)] = json.loads(out)["sparse"]
    collections = {
        "eval_beir": {"name": "wordpiece"},
        "eval_beir_words": WordAnalyzer().record(),
        "eval_beir_words_german": WordAnalyzer("german").record(),
    }
    for name, record in collections.items():
        store = open_store("qdrant", name, path=str(tmp_path / "q"))
        try:
            assert store.read_spec().model_options["bm25"]["analyzer"] == record, name
        finally:
            store.close()
    assert runs[()] != runs[("--analyzer", "words")]  # different terms, different rankings
    with pytest.raises(SystemExit) as refused:  # a name outside the fixed table never reaches a stemmer
        main(["eval", str(dataset), *common, "--language", "klingon"])
    assert refused.value.code == 2
    assert "invalid choice: 'klingon'" in capsys.readouterr().err


def test_the_table_puts_the_second_stage_beside_the_first() -> None:
    from poolrag.cli.eval import _table
    from poolrag.evaluation.run import EvalReport
    from poolrag.ingest.pipeline import IngestReport

    metric = lambda mrr: {"recall@10": 1.0, "mrr@10": mrr, "ndcg@10": 0.5}  # noqa: E731
    modes = {"dense": 0.6, "hybrid": 0.64, "hybrid+rerank": 0.7, "hybrid+rerank-replace": 0.61}
    report = EvalReport({m: metric(v) for m, v in modes.items()}, {}, IngestReport(documents=3, chunks=3), 2)
    last = _table(report, 10, "eval_x").splitlines()[-1]
    assert last == (
        "second stage vs first, MRR@10: hybrid 0.6400 | hybrid+rerank 0.7000 (+0.0600) | "
        "hybrid+rerank-replace 0.6100 (-0.0300)"
    )
    del report.metrics["hybrid+rerank"], report.metrics["hybrid+rerank-replace"]
    assert _table(report, 10, "eval_x").splitlines()[-1].startswith("hybrid ")  # no second stage, no line


def _assert_close(printed: dict, hand: dict) -> None:
    assert printed.keys() == hand.keys()
    for mode in printed:
        assert printed[mode] == pytest.approx(hand[mode], abs=1e-12), mode


@pytest.mark.real_weights
def test_rerank_modes_fuse_or_replace_the_hybrid_ranking(
    tmp_path: Path, minilm_path: Path, minilm_engine, assets: Path, capsys
) -> None:
    dataset = write_dataset(tmp_path / "beir")
    rerank_path = assets / "ms-marco-MiniLM-L-12-v2"
    common = _common("qdrant", tmp_path, minilm_path)
    code, out, err = _eval(dataset, common, capsys, "--json", "--rerank", str(rerank_path))
    assert code == 0, err
    printed = json.loads(out)
    assert list(printed) == ["dense", "sparse", "hybrid", "hybrid+rerank", "hybrid+rerank-replace"]
    cross = Engine(rerank_path)
    modes = {
        "hybrid+rerank": CrossEncoderReranker(cross),
        "hybrid+rerank-replace": CrossEncoderReranker(cross, second_stage="replace"),
    }
    hand = _hand("qdrant", tmp_path, minilm_engine, modes, 3 * K)
    for mode in modes:
        assert printed[mode] == pytest.approx(hand[mode], abs=1e-12), mode


#: A shelf of near-misses: short texts full of the query's words that answer nothing, so hybrid's first
#: stage ranks them above the one answer, a long museum guide whose one sentence says how; the
#: cross-encoder reads that sentence and ranks it first.
_FILLER = (
    "The museum guide lists opening hours, ticket prices, the cafe menu, parking rules, the cloakroom, "
    "lifts and accessible toilets, school visits, gift shop discounts and the members' evening programme. "
)
_NEAR_MISSES = (
    "Where to buy {c} flowers: our shop tells other customers where {c} flowers and honeybees prints are "
    "on sale.",
    "Honeybees are insects. {C} flowers are plants. Other bees are bumblebees.",
    "Coloring page: honeybees and other bees flying where {c} flowers are.",
    "Nobody knows whether honeybees like {c} flowers; other bees ignore them.",
)
_ANSWER = (
    "In the insect hall, a film explains that honeybees tell other bees where flowers are by dancing: the "
    "waggle dance gives the direction and distance. "
)
_BEES = "how do honeybees tell other bees where flowers are"


def _write_near_misses(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    colours = ("red", "blue", "yellow", "white", "purple", "orange", "pink", "green")
    docs = {
        f"miss{n}{c}": text.format(c=c, C=c.title()) for n, text in enumerate(_NEAR_MISSES) for c in colours
    }
    docs["answer"] = _FILLER + _ANSWER + _FILLER
    with (folder / "corpus.jsonl").open("w") as out:
        for doc_id, text in docs.items():
            out.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "bees", "text": _BEES}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nbees\tanswer\t1\n")
    return folder


@pytest.mark.real_weights
def test_the_reranked_modes_rerank_the_candidates_search_reranks(
    tmp_path: Path, minilm_path: Path, assets: Path, capsys
) -> None:
    """eval's reranked modes reranked only the chunks they kept (k, or 3k), where poolrag search
    --rerank reranks max(10k, 50) stage-1 candidates: an answer the first stage ranked just below
    them was missed by eval (recall 0) and found by search, so the table (and the share --tune
    chose) described another second stage than search runs. Each reranked row is now search's."""
    dataset = _write_near_misses(tmp_path / "beir")
    rerank = str(assets / "ms-marco-MiniLM-L-12-v2")
    common = _common("qdrant", tmp_path, minilm_path)
    runs = tmp_path / "runs"
    line = ["eval", str(dataset), *common, "-k", str(K), "-q", "--json", "--rerank", rerank]
    capsys.readouterr()
    assert main([*line, "--save-runs", str(runs)]) == 0  # one chunk a document: the K chunks kept
    printed = json.loads(capsys.readouterr().out)

    def search(k: int, *extra: str) -> list[str]:
        line = ["search", _BEES, "--hybrid", "-k", str(k), "--json", *common]
        assert main([*line, "--collection", default_collection(str(dataset)), *extra]) == 0
        return [json.loads(hit)["metadata"]["corpus_id"] for hit in capsys.readouterr().out.splitlines()]

    first_stage = search(50)
    assert K < first_stage.index("answer") + 1 <= 50  # below the K chunks kept, among search's candidates
    assert printed["hybrid"][f"recall@{K}"] == 0.0
    for mode, second_stage in (("hybrid+rerank", "fuse"), ("hybrid+rerank-replace", "replace")):
        searched = search(K, "--rerank", rerank, "--second-stage", second_stage)
        ranked = [line.split()[2] for line in (runs / f"run.{mode}.trec").read_text().splitlines()]
        assert ranked == searched, mode  # the documents eval ranks are those search gives
    assert printed["hybrid+rerank-replace"][f"recall@{K}"] == 1.0


def test_a_collection_ingested_without_hybrid_is_measured_in_the_dense_mode_and_refuses_the_others_truly(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A dense-only collection (``poolrag ingest`` without ``--hybrid``) was refused even for
    ``--modes dense``, with advice to run eval again "with --hybrid", a flag eval does not have."""
    dataset = write_dataset(tmp_path / "beir")
    common = _common("qdrant", tmp_path, minilm_path)
    code = main(["ingest", str(dataset / "corpus.jsonl"), *common, "--collection", "plain", "-q"])
    assert code == 0
    capsys.readouterr()
    code, out, err = _eval(dataset, common, capsys, "--collection", "plain", "--modes", "dense", "--json")
    assert code == 0, err
    assert list(json.loads(out)) == ["dense"]
    store = open_store("qdrant", "plain", path=str(tmp_path / "q"))
    assert store.read_spec().sparse is None  # still dense-only: nothing was mixed in
    store.close()
    for extra, needing in [
        (["--modes", "dense,hybrid"], "hybrid needs"),
        (["--tune"], "sparse, hybrid, --tune need"),
    ]:
        code, out, err = _eval(dataset, common, capsys, "--collection", "plain", *extra)
        assert code == 2 and out == ""
        assert err.strip() == (
            "poolrag eval: error: collection 'plain' has no sparse field (poolrag ingest wrote it without "
            f"--hybrid), and {needing} one: measure it with --modes dense, or evaluate into another "
            "--collection (eval gives a new one both fields)"
        )


def test_rerank_modes_without_rerank_name_the_flag(tmp_path: Path, capsys) -> None:
    dataset = write_dataset(tmp_path / "beir")
    where = ["--store", "qdrant", "--path", str(tmp_path / "q")]
    code, out, err = _eval(dataset, where, capsys, "--modes", "dense,hybrid+rerank")
    assert code == 2 and out == ""
    assert err.strip() == "poolrag eval: error: mode hybrid+rerank needs a cross-encoder: add --rerank MODEL"
    code, _, err = _eval(dataset, where, capsys, "--modes", "bm42")
    assert code == 2 and "unknown mode 'bm42'" in err and "hybrid+rerank-replace" in err


def test_eval_draws_ingests_bar_over_the_corpus_documents_and_none_with_quiet(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """Ingesting the corpus is most of an evaluation's time (a minute for a few hundred paragraphs on
    two cores): the bar runs from 0 to the documents ingested, a row left out as empty not among
    them; ``-q`` draws none."""
    dataset = write_dataset(tmp_path / "beir")
    with (dataset / "corpus.jsonl").open("a") as out:
        out.write('{"_id": "blank", "title": "", "text": " "}\n')
    line = ["eval", str(dataset), *_common("qdrant", tmp_path, minilm_path), "--modes", "dense"]
    capsys.readouterr()
    assert main(line) == 0
    err = capsys.readouterr().err.replace("\r", "\n")
    drawn = [tuple(map(int, m)) for m in re.findall(r"ingesting: .*?\b(\d+)/(\d+)\b", err)]
    assert drawn[0] == (0, len(DOCS)) and drawn[-1] == (len(DOCS), len(DOCS)), err[-2000:]
    assert main([*line, "-q"]) == 0
    assert "ingesting" not in capsys.readouterr().err


def test_a_broken_dataset_is_one_line_naming_file_and_line(tmp_path: Path, minilm_path: Path, capsys) -> None:
    dataset = write_dataset(tmp_path / "beir")
    with (dataset / "corpus.jsonl").open("a") as out:
        out.write('{"_id": "d9", "title": "no text"}\n')
    code, out, err = _eval(dataset, _common("milvus", tmp_path, minilm_path), capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("poolrag eval: error: ")
    assert f"{dataset / 'corpus.jsonl'}:9:" in lines[0]

    code, _, err = _eval(tmp_path / "missing", _common("milvus", tmp_path, minilm_path), capsys)
    assert code == 2 and "missing: not a folder" in err


def test_flags_that_cannot_work_are_refused_before_anything_loads(tmp_path: Path, capsys) -> None:
    """A weight without a reranker, more folds than judged queries: one line each, and no store was
    opened (nothing ingested, nothing embedded). A weight outside [0, 1] is argparse's usage error
    (tests/cli/test_cli_user_errors.py)."""
    dataset = write_dataset(tmp_path / "beir")
    where = ["--store", "qdrant", "--path", str(tmp_path / "q")]
    cases = [
        (["--rerank-weight", "0.3"], "--rerank-weight is the reranker's share: add --rerank MODEL"),
        (["--tune", "--folds", "10"], "10-fold cross-validation needs at least 10 judged queries, got 5"),
    ]
    for extra, message in cases:
        code, out, err = _eval(dataset, where, capsys, *extra)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert message in err
    assert not (tmp_path / "q").exists()


def test_help_names_the_collection_eval_writes_by_default(capsys) -> None:
    """It said "default: poolrag", the other commands' default, where eval writes eval_<folder>."""
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: eval_<DATASET folder name>" in text and "default: poolrag" not in text
