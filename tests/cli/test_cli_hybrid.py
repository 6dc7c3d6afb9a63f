"""``poolrag ingest --hybrid`` then ``poolrag search --hybrid`` / ``--mode sparse``, on Milvus Lite and
Qdrant local mode: the printed results are the retriever's own over the collection the command
filled, a re-run writes nothing, and a dense-only collection refuses sparse search in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.cli import main
from poolrag.retrieval import Retriever
from poolrag.sparse import BM25Encoder
from poolrag.stores import open_store

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
QUERY = "what makes the sea rise and fall"


def _where(kind: str, root: Path) -> list[str]:
    return [
        "--store",
        kind,
        *(["--uri", str(root / "m.db")] if kind == "milvus" else ["--path", str(root / "q")]),
    ]


def test_without_a_cache_each_chunks_terms_are_counted_once(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """The first batch's terms, counted to fix BM25's average length, are those stored: not counted
    (and reported) a second time when no cache remembers them."""
    ingest = ["ingest", str(SAMPLES / "nature"), "--hybrid", "--quiet", "--json", "--no-cache"]
    where = [*_where("qdrant", tmp_path), "--collection", "docs", "--model", str(minilm_path)]
    assert main([*ingest, *where]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sparse_computed"] == report["upserted"] > 0


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_hybrid_ingest_and_search_print_the_retrievers_results(
    kind: str, tmp_path: Path, minilm_path: Path, minilm_engine, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    common = [*_where(kind, tmp_path), "--collection", "docs", "--model", str(minilm_path)]
    common += ["--cache", str(tmp_path / "c.sqlite")]
    ingest = ["ingest", str(SAMPLES / "nature"), str(SAMPLES / "cooking"), "--hybrid", "--quiet", "--json"]
    assert main([*ingest, *common]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["collection"]["sparse"] == "bm25" and first["sparse_computed"] == first["upserted"] > 0
    assert main([*ingest, *common]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["upserted"], again["embedded"], again["sparse_computed"]) == (0, 0, 0)

    where = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / "q")}
    searches = [(["--hybrid"], "hybrid", None), (["--hybrid", "--prefetch", "3"], "hybrid", 3)]
    searches += [(["--mode", "sparse"], "sparse", None), ([], "dense", None)]
    for flags, mode, prefetch in searches:
        caplog.clear()
        with caplog.at_level("INFO", logger="poolrag.cli.search"):
            assert main(["search", QUERY, "-k", "5", "--json", "-v", *flags, *common]) == 0
        printed = _json_lines(capsys.readouterr().out)
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("hybrid: fused by")]
        # -v says what fuses: with nothing tuned and saved, the default; nothing for other modes
        assert said == (
            ["hybrid: fused by adaptive 0.4, the collection's default (no 'poolrag eval --tune --save')"]
            if mode == "hybrid"
            else []
        )
        store = open_store(kind, "docs", **where)
        try:
            embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
            retriever = Retriever(store, embedder, sparse_encoder=BM25Encoder(minilm_engine.tokenizer))
            want = retriever.search(QUERY, 5, mode=mode, prefetch=prefetch)
        finally:
            store.close()
        assert [r["id"] for r in printed] == [r.id for r in want], mode
        assert [r["score"] for r in printed] == pytest.approx([r.score for r in want], abs=1e-6), mode
        assert all(set(r["stages"]) == set(w.stage_scores) for r, w in zip(printed, want, strict=True))
    assert any("tide" in r["text"].lower() for r in printed)


def test_sparse_search_of_a_dense_collection_is_one_line(tmp_path: Path, minilm_path: Path, capsys) -> None:
    common = [*_where("qdrant", tmp_path), "--collection", "docs", "--model", str(minilm_path), "--no-cache"]
    assert main(["ingest", str(SAMPLES / "nature"), "--quiet", *common]) == 0
    capsys.readouterr()
    assert main(["search", QUERY, "--hybrid", *common]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "has no sparse field" in err
    assert "'poolrag ingest --hybrid' into a new --collection" in err  # the fix, not only the cause
    # And the other way round: --hybrid into the dense collection is refused before embedding.
    assert main(["ingest", str(SAMPLES / "nature"), "--quiet", "--hybrid", *common]) == 2
    assert "sparse field none vs bm25" in capsys.readouterr().err


def test_a_sparse_search_matching_no_chunk_says_so_not_that_the_collection_may_be_empty(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A query whose kept terms no chunk holds finds nothing in sparse mode; the collection has
    chunks, so 'it may be empty' (said before) sent the user to re-ingest."""
    where = [*_where("qdrant", tmp_path), "--collection", "w", "--model", str(minilm_path), "--no-cache"]
    assert main(["ingest", str(SAMPLES / "nature"), "--hybrid", "-q", "--json", *where]) == 0
    chunks = json.loads(capsys.readouterr().out)["upserted"]
    assert main(["search", "xylophonequartz", "--mode", "sparse", "--json", *where]) == 0
    found = capsys.readouterr()
    assert found.out == ""
    assert f"none of the {chunks} chunks in collection 'w' holds a term of the query" in found.err
    assert "may be empty" not in found.err
