"""The eval driver on a tiny BEIR folder written here, against real Milvus Lite and Qdrant local mode:
its metrics equal a hand computation from the retriever's own outputs, a second run embeds
nothing, and broken datasets fail with file:line before anything is embedded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.errors import InvalidInputError
from poolrag.evaluation import BeirDataset, BeirFormatError
from poolrag.evaluation.run import Evaluation, corpus_documents, parse_modes, write_trec_runs
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.sparse_encoders import bm25_for_model
from poolrag.retrieval import Retriever
from poolrag.stores import open_store

K = 3
DOCS = {
    "d1": ("Honeybees", "Foragers tell their sisters where flowers are with the waggle dance."),
    "d2": (
        "Tides",
        "The Moon's gravity raises two bulges in the oceans, so the sea rises and falls twice a day.",
    ),
    "d3": (
        "Sourdough",
        "Sourdough rises with a starter of wild yeast. " * 6 + "Bake it in a very hot covered pot.",
    ),
    "d4": ("Part catalogue", "Hinge bracket ZX-7731 fits the left cabinet door of the 1998 model."),
    "d5": ("Part catalogue", "Hinge bracket ZX-7713 fits the right cabinet door of the 1998 model."),
    "d6": ("Chess", "Good openings control the centre, develop knights and bishops and castle early."),
    "d7": (
        "Rust",
        "Every value has exactly one owner; the borrow checker forbids data races at compile time.",
    ),
    "d8": ("Owls", "Owls hunt at night; soft feathers make their flight silent. " * 5),
}
QUERIES = {
    "q1": "how do bees share where food is",
    "q2": "why does the ocean go up and down",
    "q3": "which bracket is ZX-7731",
    "q4": "bread leavened by wild yeast",
    "q5": "memory safety without a garbage collector",
    "q6": "a query nobody judged",
}
QRELS = [("q1", "d1", 1), ("q2", "d2", 2), ("q2", "d8", 0), ("q3", "d4", 2), ("q3", "d5", 1)]
QRELS += [("q4", "d3", 1), ("q5", "d7", 1), ("q5", "d6", 1)]


def write_dataset(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as out:
        for doc_id, (title, text) in DOCS.items():
            out.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as out:
        for query_id, text in QUERIES.items():
            out.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{s}" for q, d, s in QRELS)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def hand_metrics(run: dict[str, list[tuple[str, float]]], k: int) -> dict[str, float]:
    """recall / reciprocal rank / nDCG at k averaged over judged queries, written out longhand
    (ties broken by document id descending, as trec_eval does)."""
    judged = {}
    for q, d, s in QRELS:
        judged.setdefault(q, {})[d] = s
    totals = {"recall": 0.0, "mrr": 0.0, "ndcg": 0.0}
    for query_id, grades in judged.items():
        ranked = sorted(run.get(query_id, []), key=lambda pair: pair[0], reverse=True)
        ranked = [d for d, _ in sorted(ranked, key=lambda pair: -pair[1])][:k]
        relevant = {d for d, g in grades.items() if g > 0}
        totals["recall"] += len(relevant & set(ranked)) / len(relevant)
        first = next((i for i, d in enumerate(ranked) if d in relevant), None)
        totals["mrr"] += 0.0 if first is None else 1.0 / (first + 1)
        dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked))
        ideal = sorted(grades.values(), reverse=True)[:k]
        totals["ndcg"] += dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return {f"{name}@{k}": value / len(judged) for name, value in totals.items()}


def by_document(results) -> list[tuple[str, float]]:
    best: dict[str, float] = {}
    for r in results:
        doc = r.payload["corpus_id"]
        best[doc] = max(best.get(doc, -math.inf), r.score)
    return list(best.items())


class Bench:
    """The evaluation wiring ``poolrag eval`` uses, over one store and one cache in a tmp folder."""

    def __init__(self, kind: str, root: Path, engine) -> None:
        self.kind, self.root, self.engine = kind, root, engine
        self.dataset = BeirDataset(write_dataset(root / "beir"))

    def open(self):
        where = {"uri": str(self.root / "m.db")} if self.kind == "milvus" else {"path": str(self.root / "q")}
        return open_store(self.kind, "beir", **where)

    def evaluation(self, store) -> tuple[Evaluation, CachedEmbedder]:
        cache = EmbeddingCache(self.root / "cache.sqlite")
        embedder = CachedEmbedder(self.engine, cache)
        sparse = bm25_for_model(self.engine.tokenizer, self.engine.facts.model_identity, cache)
        chunker = TokenChunker(self.engine.tokenizer, max_tokens=32, overlap=4)
        pipeline = IngestPipeline(
            store,
            DenseEncoder(embedder),
            chunker,
            batch_size=4,
            checkpoint_dir=self.root / "ck",
            progress=False,
            sparse_encoder=sparse,
        )
        return Evaluation(pipeline, embedder, sparse_encoder=sparse), embedder


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_metrics_equal_a_hand_computation_and_a_second_run_embeds_nothing(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    bench = Bench(kind, tmp_path, minilm_engine)
    modes = ["dense", "sparse", "hybrid"]
    store = bench.open()
    try:
        evaluation, embedder = bench.evaluation(store)
        report = evaluation.run(bench.dataset, modes, k=K)
        assert report.queries == 5  # q6 is not judged
        assert report.ingest.documents == len(DOCS) and report.ingest.chunks > len(DOCS)  # d3, d8 split
        assert report.ingest.upserted == report.ingest.chunks and report.ingest.embedded > 0
        assert report.queries_embedded == 5
        depth = report.settings["chunks_per_query"]
        assert depth == 3 * K

        sparse = bm25_for_model(minilm_engine.tokenizer, minilm_engine.facts.model_identity)
        retriever = Retriever(store, embedder, sparse_encoder=sparse)
        for mode in modes:
            run = {q: by_document(retriever.search(QUERIES[q], depth, mode=mode)) for q in QUERIES}
            got = {q: dict(pairs) for q, pairs in report.runs[mode].items()}
            searched = {q: dict(run[q]) for q in QUERIES if q != "q6"}
            assert {q: list(d) for q, d in got.items()} == {q: list(d) for q, d in searched.items()}
            # the run embedded its queries together, these one by one: fp32 sums in another order
            assert got == {q: pytest.approx(scores, abs=1e-6) for q, scores in searched.items()}
            want = hand_metrics(run, K)
            assert report.metrics[mode] == pytest.approx(want, abs=1e-12), mode
        # The metrics are not all perfect, so the comparison above could fail.
        assert any(v < 1.0 for m in modes for v in report.metrics[m].values())
    finally:
        store.close()

    store = bench.open()
    try:
        evaluation, _ = bench.evaluation(store)
        again = evaluation.run(bench.dataset, modes, k=K)
        assert again.ingest.upserted == 0 and again.ingest.embedded == 0 and again.ingest.sparse_computed == 0
        assert again.queries_embedded == 0
        assert again.metrics == report.metrics
    finally:
        store.close()


def test_documents_carry_title_and_corpus_id(tmp_path: Path) -> None:
    dataset = BeirDataset(write_dataset(tmp_path / "beir"))
    first = next(corpus_documents(dataset))
    assert first.text.startswith("Honeybees\n\nForagers")
    assert first.metadata["corpus_id"] == "d1" and first.source.endswith("corpus.jsonl#d1")


@pytest.mark.parametrize(
    ("breakage", "where"),
    [
        (
            lambda f: (f / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\n{"_id": "q2"}\n'),
            "queries.jsonl:2",
        ),
        (
            lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n"),
            "test.tsv:2",
        ),
        (
            lambda f: (f / "queries.jsonl").write_text(
                '{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": " "}\n'
            ),
            "queries.jsonl:2",
        ),
        (  # no visible character: the model refused it as input[1] of its batch, mid-evaluation
            lambda f: (f / "queries.jsonl").write_text(
                '{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": "\\u200b\\u200d"}\n'
            ),
            "queries.jsonl:2: query 'q2' is empty",
        ),
        (  # JSON's escape for a lone surrogate, which no tokenizer encodes
            lambda f: (f / "queries.jsonl").write_text(
                '{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": "bee \\ud800 hive"}\n'
            ),
            "queries.jsonl:2: query 'q2' is not valid Unicode",
        ),
    ],
    ids=[
        "query-without-text",
        "qrels-short-line",
        "query-with-blank-text",
        "query-of-zero-widths",
        "lone-surrogate",
    ],
)
def test_a_broken_dataset_names_file_and_line_before_anything_is_embedded(
    tmp_path: Path, minilm_engine, breakage, where: str
) -> None:
    bench = Bench("qdrant", tmp_path, minilm_engine)
    caught = _refused_before_embedding(bench, breakage, BeirFormatError, where.replace(".", r"\."))
    assert str(caught).startswith(str(bench.dataset.folder))


def _refused_before_embedding(bench: Bench, breakage, error: type[Exception], match: str) -> Exception:
    """Run the evaluation on the broken dataset: ``error`` is raised, nothing embedded or stored."""
    breakage(bench.dataset.folder)
    store = bench.open()
    try:
        evaluation, embedder = bench.evaluation(store)
        with pytest.raises(error, match=match) as caught:
            evaluation.run(bench.dataset, ["dense"], k=K)
        assert embedder.misses == 0 and store.read_spec() is None
        return caught.value
    finally:
        store.close()


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (
            lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t0\n"),
            "has a relevant document",
        ),
        (lambda f: (f / "corpus.jsonl").write_text(""), "corpus.jsonl: no documents"),
        (  # every row is left out as empty: searched, it scored 0 in every mode with exit 0
            lambda f: (f / "corpus.jsonl").write_text(
                "".join(json.dumps({"_id": d, "title": "", "text": ""}) + "\n" for d in DOCS)
            ),
            r"corpus.jsonl: no document with text or an image \(8 left out\); nothing to search",
        ),
        (lambda f: (f / "queries.jsonl").write_text(""), r"queries.jsonl: no queries \(the file is empty\)"),
        (  # the qrels name the documents D1, D2, ...: no ranking could score above 0
            lambda f: (f / "qrels" / "test.tsv").write_text(
                "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d.upper()}\t{s}\n" for q, d, s in QRELS)
            ),
            r"none of the 7 documents judged relevant is in .*corpus.jsonl \(judged: D1, D2, D3, D4, D5 "
            r"and 2 more; the corpus has ids such as d1, d2, d3\)",
        ),
    ],
    ids=[
        "no-grade-above-0",
        "empty-corpus",
        "only-empty-documents",
        "empty-queries",
        "no-judged-document-in-corpus",
    ],
)
def test_a_dataset_with_nothing_to_evaluate_is_refused_before_anything_is_embedded(
    tmp_path: Path, minilm_engine, breakage, message: str
) -> None:
    _refused_before_embedding(Bench("qdrant", tmp_path, minilm_engine), breakage, InvalidInputError, message)


def test_the_saved_mode_without_a_saved_setting_is_refused_before_anything_is_embedded(
    tmp_path: Path, minilm_engine
) -> None:
    """Whether the collection holds a ``--tune --save`` record is known before the corpus is read:
    it was refused only after the whole corpus had been embedded (hours on a large one)."""
    bench = Bench("qdrant", tmp_path, minilm_engine)
    store = bench.open()
    try:
        evaluation, embedder = bench.evaluation(store)
        with pytest.raises(InvalidInputError, match=r"mode saved .* holds none"):
            evaluation.run(bench.dataset, ["dense", "saved"], k=K)
        assert embedder.misses == 0 and store.read_spec() is None
    finally:
        store.close()


def test_an_owned_collection_follows_the_corpus_and_reports_its_own_chunks(
    tmp_path: Path, minilm_engine
) -> None:
    """``prune`` (eval's own collection): a document taken out of corpus.jsonl is no longer searched;
    the chunk count is the collection's, whatever the run had left to chunk."""
    bench = Bench("qdrant", tmp_path, minilm_engine)
    store = bench.open()
    try:
        evaluation, _ = bench.evaluation(store)
        first = evaluation.run(bench.dataset, ["dense"], k=K, prune=True)
        assert first.chunks == store.count() > len(DOCS)  # d3 and d8 span several chunks
        corpus = bench.dataset.corpus_path
        corpus.write_text("".join(line for line in corpus.open() if '"d8"' not in line))
        second = evaluation.run(bench.dataset, ["dense"], k=K, prune=True)
        assert second.ingest.deleted > 0 and second.chunks == store.count() < first.chunks
        found = {doc for run in second.runs["dense"].values() for doc, _ in run}
        assert "d8" not in found and "d2" in found
    finally:
        store.close()


def test_long_documents_leave_k_documents_in_every_query_s_run(tmp_path: Path, minilm_engine) -> None:
    """Each query's run holds k documents wherever the collection has them: the search widens past
    3k chunks when long documents fill them (a query's run held 2 of 3 here, and a relevant short
    document past them counted as missed)."""
    bench = Bench("qdrant", tmp_path, minilm_engine)
    long_text = "Sourdough rises with a starter of wild yeast. "
    corpus = [
        {"_id": "long1", "title": "", "text": long_text * 30},
        {"_id": "long2", "title": "", "text": "A sourdough starter is wild yeast and flour. " * 30},
        {"_id": "short", "title": "", "text": "Rye bread keeps for a week in a cloth bag."},
        {"_id": "other", "title": "", "text": "Owls hunt at night with silent feathers."},
    ]
    folder = bench.dataset.corpus_path.parent
    bench.dataset.corpus_path.write_text("".join(json.dumps(doc) + "\n" for doc in corpus))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": long_text}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\tshort\t1\n")
    store = bench.open()
    try:
        evaluation, _ = bench.evaluation(store)
        report = evaluation.run(BeirDataset(folder), ["dense", "sparse", "hybrid"], k=K)
        assert store.count() > 3 * K * 2  # the long documents alone fill the first 3k chunks
        for mode, runs in report.runs.items():
            assert len(runs["q"]) >= K or mode == "sparse", (mode, runs["q"])
        assert {doc for doc, _ in report.runs["dense"]["q"]} >= {"long1", "long2", "short"}
    finally:
        store.close()


ARGUMENTS = {
    "a1-pro": "Vegetarian diets help the environment because meat production emits greenhouse gases.",
    "a1-con": "Meat can be farmed sustainably and grazing land stores carbon in the soil.",
    "a2-pro": "School uniforms reduce bullying since children cannot be judged by their clothes.",
    "a2-con": "Uniforms do not stop bullying; children find other things to mock and lose self expression.",
    "a3-pro": "Nuclear power is a clean energy source with very low carbon emissions.",
    "a3-con": "Nuclear waste stays dangerous for thousands of years and accidents are catastrophic.",
}


def test_a_query_s_own_unjudged_document_is_left_out_of_its_ranking_as_beir_leaves_it(
    tmp_path: Path, minilm_engine
) -> None:
    """ArguAna and Quora take each query from the corpus under the same id, so that document comes
    first and answers nothing; BEIR's ``EvaluateRetrieval.evaluate`` (``ignore_identical_ids=True``)
    and MTEB drop it, and published tables are computed so. A document whose id merely collides with
    the query's and that the qrels judge for it stays."""
    bench = Bench("qdrant", tmp_path, minilm_engine)
    folder = bench.dataset.corpus_path.parent
    corpus = [{"_id": i, "title": "", "text": t} for i, t in ARGUMENTS.items()]
    bench.dataset.corpus_path.write_text("".join(json.dumps(doc) + "\n" for doc in corpus))
    queries = [{"_id": i, "text": ARGUMENTS[i]} for i in ("a1-pro", "a2-pro", "a3-con")]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "query-id\tcorpus-id\tscore\na1-pro\ta1-con\t1\na2-pro\ta2-con\t1\na3-con\ta3-con\t1\n"
    (folder / "qrels" / "test.tsv").write_text(qrels)
    store = bench.open()
    try:
        evaluation, _ = bench.evaluation(store)
        report = evaluation.run(BeirDataset(folder), ["dense", "sparse", "hybrid"], k=K)
    finally:
        store.close()
    for mode, run in report.runs.items():
        for query_id in ("a1-pro", "a2-pro"):
            ranked = [doc for doc, _ in run[query_id]]
            assert query_id not in ranked, (mode, query_id, ranked)
            assert len(ranked) >= K or mode == "sparse", (mode, query_id, ranked)  # BM25: shared terms only
        assert run["a3-con"][0][0] == "a3-con", mode  # judged for its query: it counts
    assert report.metrics["dense"] == {f"recall@{K}": 1.0, f"mrr@{K}": 1.0, f"ndcg@{K}": 1.0}


class CountingReranker:
    """A cross-encoder engine that counts the (query, passage) pairs it scores."""

    def __init__(self, engine) -> None:
        self.engine, self.facts, self.pairs = engine, engine.facts, []

    def score_array(self, query, passages, params=None):
        self.pairs += [(query, p) for p in passages]
        return self.engine.score_array(query, passages, params)


def test_the_reranked_modes_score_each_pair_once(tmp_path: Path, minilm_engine, tiny_model) -> None:
    """hybrid+rerank and hybrid+rerank-replace rerank the same fused lists: each (query, chunk)
    pair goes through the cross-encoder once (it went once per mode, half of a run's time), and each
    mode's ranking is the one a reranker of its own gives."""
    from poolrag import Engine
    from poolrag.retrieval import CrossEncoderReranker

    bench = Bench("qdrant", tmp_path, minilm_engine)
    cross = Engine(tiny_model("bert", head="sequence", num_labels=1))
    counting = CountingReranker(cross)
    store = bench.open()
    try:
        evaluation, embedder = bench.evaluation(store)
        evaluation.reranker = counting
        evaluation.rerank_weight = 0.5
        modes = ["hybrid+rerank", "hybrid+rerank-replace"]
        report = evaluation.run(bench.dataset, modes, k=K)
        assert counting.pairs and len(counting.pairs) == len(set(counting.pairs))
        depth = report.settings["chunks_per_query"]
        sparse = evaluation.sparse_encoder
        for mode, stage in zip(modes, ["fuse", "replace"], strict=True):
            own = CrossEncoderReranker(cross, second_stage=stage, weight=0.5)
            retriever = Retriever(store, embedder, reranker=own, sparse_encoder=sparse)
            for query_id, ranked in report.runs[mode].items():
                # the candidates poolrag search --rerank -k K reranks by default
                hits = retriever.search(QUERIES[query_id], depth, mode="hybrid", candidates=max(10 * K, 50))
                assert [doc for doc, _ in ranked] == [doc for doc, _ in by_document(hits)], (mode, query_id)
    finally:
        store.close()


def test_modes_are_checked() -> None:
    assert parse_modes("dense, hybrid,dense") == ["dense", "hybrid"]
    with pytest.raises(InvalidInputError, match="unknown mode 'bm25'"):
        parse_modes("dense,bm25")


def test_a_run_whose_ids_hold_whitespace_is_refused_before_any_trec_file_is_written(tmp_path: Path) -> None:
    """TREC readers split lines at whitespace: ``doc 7`` would come back as document ``doc``."""
    runs = {"dense": {"q1": [("a", 0.9)]}, "hybrid": {"q1": [("doc 7", 0.5)]}}
    with pytest.raises(InvalidInputError, match=r"'doc 7' cannot be written to a TREC run file"):
        write_trec_runs(runs, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    with pytest.raises(InvalidInputError, match=r"'q\\t1'"):
        write_trec_runs({"dense": {"q\t1": [("a", 0.9)]}}, tmp_path / "runs")
    written = write_trec_runs({"dense": {"q1": [("a", 0.9)]}}, tmp_path / "runs")
    assert [path.read_text() for path in written] == ["q1 Q0 a 1 0.9 poolrag-dense\n"]


def test_a_query_without_sparse_terms_ranks_nothing_there_and_the_evaluation_and_tuning_go_on(
    tmp_path: Path, minilm_engine
) -> None:
    """An emoji-only query has no word piece BM25 keeps (MiniLM reads each emoji as [UNK]): one
    search refuses it, but ``eval --modes sparse`` and ``eval --tune`` stopped at it with "the query
    has no terms ...", naming no query. BM25 ranks nothing for it in BEIR; so does the sparse leg here."""
    from poolrag.evaluation.tune import tune

    bench = Bench("qdrant", tmp_path, minilm_engine)
    with (bench.dataset.folder / "queries.jsonl").open("a") as out:
        out.write(json.dumps({"_id": "q7", "text": "🐝 💃 🌼"}) + "\n")
    with (bench.dataset.folder / "qrels" / "test.tsv").open("a") as out:
        out.write("q7\td1\t1\n")
    store = bench.open()
    try:
        evaluation, _ = bench.evaluation(store)
        report = evaluation.run(bench.dataset, ["dense", "sparse", "hybrid"], k=K)
        assert report.queries == 6
        assert report.runs["sparse"]["q7"] == []
        assert report.runs["dense"]["q7"] and report.runs["hybrid"]["q7"]  # the dense leg alone
        assert report.runs["sparse"]["q1"]  # the other queries' sparse runs are as before
        tuned = tune(
            evaluation, bench.dataset, report.runs["dense"], k=K, depth=report.settings["chunks_per_query"]
        )
        assert tuned.queries == 6
    finally:
        store.close()
