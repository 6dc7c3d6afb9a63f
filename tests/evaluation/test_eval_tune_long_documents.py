"""``--tune``'s candidates on long documents, against real Qdrant local mode: each candidate's run is
widened as the table's rows are, so dense alone ranks every query exactly as the dense row does and
the default fusion exactly as the hybrid row does (kept to the first 3k chunks, every candidate saw
one or two long documents per query, and dense alone scored recall 0.1 beside the dense row's 1.0)."""

from __future__ import annotations

import json
from pathlib import Path

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.evaluation import BeirDataset
from poolrag.evaluation.metrics import evaluate_per_query
from poolrag.evaluation.run import Evaluation
from poolrag.evaluation.tune import FetchedLegs, Setting, candidate_run, tune
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.sparse_encoders import bm25_for_model
from poolrag.retrieval import Retriever
from poolrag.stores import open_store
from poolrag.stores.hybrid import DEFAULT_FUSION

K = 3
#: Each question, its short answer (the one relevant document), and a long forum thread that repeats
#: the question without answering it: its many chunks fill the first 3k chunks of every search.
QUESTIONS = [
    ("why do corals turn white", "Corals expel their algae when the water gets too warm."),
    ("how to make a sourdough starter", "Mix flour and water and let wild yeast ferment it for days."),
    ("what causes ocean tides", "The pull of the Moon and the Sun raises and lowers the sea."),
    ("why does iron rust", "Iron reacts with oxygen and water to form iron oxide."),
    ("how is honey made", "Bees collect nectar and evaporate it in wax combs."),
]


def _long_document_beir(folder: Path) -> BeirDataset:
    (folder / "qrels").mkdir(parents=True)
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for i, (question, answer) in enumerate(QUESTIONS):
        thread = " ".join(f"Post {j} asks: {question}? Nobody in this thread knows." for j in range(100))
        corpus += [{"_id": f"answer{i}", "text": answer}, {"_id": f"thread{i}", "text": thread}]
        queries.append({"_id": f"q{i}", "text": question})
        qrels.append(f"q{i}\tanswer{i}\t1")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return BeirDataset(folder)


def test_dense_alone_as_a_candidate_ranks_every_query_as_the_dense_row_does(
    tmp_path: Path, minilm_engine
) -> None:
    dataset = _long_document_beir(tmp_path / "beir")
    store = open_store("qdrant", "long", path=str(tmp_path / "q"))
    try:
        cache = EmbeddingCache(tmp_path / "cache.sqlite")
        embedder = CachedEmbedder(minilm_engine, cache)
        sparse = bm25_for_model(minilm_engine.tokenizer, minilm_engine.facts.model_identity, cache)
        chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=32, overlap=4)
        pipeline = IngestPipeline(
            store,
            DenseEncoder(embedder),
            chunker,
            checkpoint_dir=tmp_path / "ck",
            progress=False,
            sparse_encoder=sparse,
        )
        evaluation = Evaluation(pipeline, embedder, sparse_encoder=sparse)
        report = evaluation.run(dataset, ["dense", "hybrid"], k=K)
        depth = int(report.settings["chunks_per_query"])
        assert report.chunks > len(QUESTIONS) * 50  # each thread is longer than the legs' 50 chunks

        retriever = Retriever(store, embedder, sparse_encoder=sparse)
        queries, qrels = dataset.judged_queries()
        legs = {q.id: FetchedLegs(retriever, q.text) for q in queries}
        for setting, row in [(Setting(("minmax", 0.0)), "dense"), (Setting(DEFAULT_FUSION), "hybrid")]:
            run = candidate_run(legs, setting, k=K, depth=depth, chunks=report.chunks)
            for query_id, ranked in report.runs[row].items():
                assert [d for d, _ in run[query_id]] == [d for d, _ in ranked], (row, query_id)
            assert evaluate_per_query(run, qrels, (K,)) == evaluate_per_query(report.runs[row], qrels, (K,))
        assert report.metrics["dense"][f"recall@{K}"] == 1.0  # so a cut-off candidate would differ

        # Sparse evidence helps no query here, so every fold chooses dense alone, held out as dense.
        tuned = tune(evaluation, dataset, report.runs["dense"], k=K, depth=depth)
        assert set(tuned.fold_settings) == {Setting(("minmax", 0.0))}
        assert tuned.held_out == tuned.dense == report.metrics["dense"]
        assert tuned.comparison.ties == len(QUESTIONS) and tuned.comparison.p_value == 1.0
    finally:
        store.close()
