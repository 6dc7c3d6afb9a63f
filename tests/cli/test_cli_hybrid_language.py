"""``poolrag ingest --hybrid --language NAME`` records the model card's languages and the collection's
with the BM25 settings, on Milvus Lite and Qdrant local mode; where the model (all-MiniLM-L6-v2, whose
card says ``en``) does not cover the collection's language, ``poolrag search --hybrid`` and the
Retriever fuse by ``OUT_OF_LANGUAGE_FUSION``, BM25's share raised; an English collection keeps
``DEFAULT_FUSION``. Without ``--language`` the collection's language is detected from its first batch
(English samples: recorded ``en``; an Italian folder: recorded ``it``, BM25 leading)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.sparse.bm25 import BM25_RECORD_KEY
from poolrag.stores import open_store
from poolrag.stores.hybrid import DEFAULT_FUSION
from poolrag.stores.language_prior import (
    LANGUAGES_RECORD_KEY,
    OUT_OF_LANGUAGE_FUSION,
    collection_default_fusion,
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
QUERIES = ["what makes the sea rise and fall", "how long to knead bread dough", "why do leaves change colour"]


def _ids(results) -> list[str]:
    return [r.id for r in results]


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_the_collections_language_makes_bm25_lead_where_the_model_does_not_cover_it(
    kind: str, tmp_path: Path, minilm_path: Path, minilm_engine, capsys
) -> None:
    where = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / "q")}
    flags = ["--store", kind, *(f"--{k}={v}" for k, v in where.items()), "--model", str(minilm_path)]
    flags += ["--cache", str(tmp_path / "c.sqlite")]
    docs = [str(SAMPLES / "nature"), str(SAMPLES / "cooking")]
    declared = {"italian": "docs_it", "english": "docs_en", None: "docs_plain"}
    for language, collection in declared.items():
        named = [] if language is None else ["--language", language]
        assert main(["ingest", *docs, "--hybrid", "--quiet", "--collection", collection, *named, *flags]) == 0
    capsys.readouterr()

    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    expected = {"docs_it": OUT_OF_LANGUAGE_FUSION, "docs_en": DEFAULT_FUSION, "docs_plain": DEFAULT_FUSION}
    records = {
        "docs_it": {"model": ["en"], "collection": "it"},
        "docs_en": {"model": ["en"], "collection": "en"},
        "docs_plain": {"model": ["en"], "collection": "en"},  # detected
    }
    for collection, fusion in expected.items():
        store = open_store(kind, collection, **where)
        try:
            spec = store.read_spec()
            assert spec.model_options[BM25_RECORD_KEY].get(LANGUAGES_RECORD_KEY) == records.get(collection)
            retriever = Retriever(store, embedder, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
            found = {q: retriever.search(q, 5, mode="hybrid") for q in QUERIES}
            for query in QUERIES:
                assert _ids(found[query]) == _ids(retriever.search(query, 5, mode="hybrid", fusion=fusion))
            if collection == "docs_it":  # the raised share changes what is found
                other = {
                    q: _ids(retriever.search(q, 5, mode="hybrid", fusion=DEFAULT_FUSION)) for q in QUERIES
                }
                assert any(_ids(found[q]) != other[q] for q in QUERIES)
                assert {q: [round(r.score, 6) for r in found[q]] for q in QUERIES} != {
                    q: [
                        round(r.score, 6)
                        for r in retriever.search(q, 5, mode="hybrid", fusion=DEFAULT_FUSION)
                    ]
                    for q in QUERIES
                }
        finally:
            store.close()
        assert (
            main(["search", QUERIES[0], "-k", "5", "--json", "--hybrid", "--collection", collection, *flags])
            == 0
        )
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [r["id"] for r in printed] == _ids(found[QUERIES[0]]), collection


ITALIAN = {
    "mare.txt": "Il mare sale e scende due volte al giorno. La luna è la causa principale delle maree, "
    "e anche il sole ha un piccolo effetto su questo movimento dell'acqua.",
    "pane.txt": "Per fare il pane si impasta la farina con acqua e lievito. Non è difficile: "
    "l'impasto deve riposare per almeno un'ora prima di andare nel forno.",
    "foglie.txt": "In autunno le foglie cambiano colore perché la clorofilla si degrada e "
    "gli altri pigmenti della foglia diventano visibili.",
}


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_an_undeclared_italian_collection_is_detected_and_bm25_leads(
    kind: str, tmp_path: Path, minilm_path: Path
) -> None:
    folder = tmp_path / "documenti"
    folder.mkdir()
    for name, text in ITALIAN.items():
        (folder / name).write_text(text)
    where = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / "q")}
    flags = ["--store", kind, *(f"--{k}={v}" for k, v in where.items()), "--model", str(minilm_path)]
    line = ["ingest", str(folder), "--hybrid", "--quiet", "--no-cache", "--collection", "it", *flags]
    assert main(line) == 0
    store = open_store(kind, "it", **where)
    try:
        spec = store.read_spec()
        recorded = spec.model_options[BM25_RECORD_KEY][LANGUAGES_RECORD_KEY]
        assert recorded == {"model": ["en"], "collection": "it"}
        assert collection_default_fusion(spec) == OUT_OF_LANGUAGE_FUSION
    finally:
        store.close()
