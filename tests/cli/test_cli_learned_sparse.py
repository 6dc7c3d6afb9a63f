"""``poolrag ingest --hybrid`` with a learned sparse source (``--sparse-model`` SPLADE beside MiniLM, or a
BGE-M3's own sparse head), then ``poolrag search --hybrid`` and ``poolrag eval``, on Milvus Lite and
Qdrant local mode: a re-run computes nothing, the search prints the retriever's own results with the
engines' query vectors, eval's metrics equal a hand computation over the collection it filled, and a
missing or different sparse model is refused in one line."""

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
from poolrag.ingest.shared_pass import own_head_encoders
from poolrag.ingest.sparse_encoders import LearnedSparseChunkEncoder
from poolrag.retrieval import Retriever
from poolrag.stores import open_store
from poolrag.testing.tiny_models import build_bge_m3, build_splade

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))
from test_eval_run import QUERIES, by_document, hand_metrics, write_dataset

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
QUERY = "what makes the sea rise and fall"
K = 3


@pytest.fixture(scope="module")
def splade_path(tmp_path_factory, minilm_path: Path) -> Path:
    return build_splade(tmp_path_factory.mktemp("splade"), minilm_path)


@pytest.fixture(scope="module")
def other_splade_path(tmp_path_factory, minilm_path: Path) -> Path:
    return build_splade(tmp_path_factory.mktemp("splade"), minilm_path, seed=5)


@pytest.fixture(scope="module")
def m3_path(tmp_path_factory, minilm_path: Path) -> Path:
    return build_bge_m3(tmp_path_factory.mktemp("m3"), minilm_path)


def _where(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / "q")}


def _common(kind: str, root: Path, model: Path) -> list[str]:
    flag = "--uri" if kind == "milvus" else "--path"
    return ["--store", kind, flag, _where(kind, root)[flag[2:]], "--model", str(model)]


def _retriever_results(kind, root, collection, dense: Engine, sparse: LearnedSparseChunkEncoder, mode):
    store = open_store(kind, collection, **_where(kind, root))
    try:
        retriever = Retriever(
            store, CachedEmbedder(dense, EmbeddingCache(root / "c.sqlite")), sparse_encoder=sparse
        )
        return retriever.search(QUERY, 5, mode=mode)
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
@pytest.mark.parametrize("source", ["splade", "bge-m3"])
def test_learned_hybrid_ingest_and_search_print_the_retrievers_results(
    kind: str, source: str, tmp_path: Path, minilm_path: Path, splade_path: Path, m3_path: Path, capsys
) -> None:
    main_path = minilm_path if source == "splade" else m3_path
    sparse_flags = ["--sparse-model", str(splade_path)] if source == "splade" else []
    common = [
        *_common(kind, tmp_path, main_path),
        "--collection",
        "docs",
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    ingest = ["ingest", str(SAMPLES / "nature"), str(SAMPLES / "cooking"), "--hybrid", "--quiet", "--json"]
    assert main([*ingest, *sparse_flags, *common]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["collection"]["sparse"] == "learned"
    assert first["sparse_computed"] == first["embedded"] == first["upserted"] > 0
    assert main([*ingest, *sparse_flags, *common]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["upserted"], again["embedded"], again["sparse_computed"]) == (0, 0, 0)

    dense = Engine(main_path)
    if source == "splade":
        sparse = LearnedSparseChunkEncoder(Engine(splade_path))
    else:
        _, sparse = own_head_encoders(dense, None)
    for flags, mode in ((["--hybrid"], "hybrid"), (["--mode", "sparse"], "sparse")):
        assert main(["search", QUERY, "-k", "5", "--json", *flags, *sparse_flags, *common]) == 0
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        want = _retriever_results(kind, tmp_path, "docs", dense, sparse, mode)
        assert len(want) == 5
        assert [r["id"] for r in printed] == [r.id for r in want], mode
        assert [r["score"] for r in printed] == pytest.approx([r.score for r in want], abs=1e-6), mode


def test_search_refuses_a_missing_or_different_sparse_model(
    tmp_path: Path, minilm_path: Path, splade_path: Path, m3_path: Path, capsys
) -> None:
    common = [*_common("qdrant", tmp_path, minilm_path), "--collection", "docs", "--no-cache"]
    ingest = ["ingest", str(SAMPLES / "nature"), "--hybrid", "--sparse-model", str(splade_path), "--quiet"]
    assert main([*ingest, *common]) == 0
    capsys.readouterr()
    assert main(["search", QUERY, "--hybrid", *common]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pass --sparse-model with the model the collection" in err
    assert str(splade_path) not in err  # the collection's record is data, never a suggested command
    assert main(["search", QUERY, "--hybrid", "--sparse-model", str(m3_path), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sparse vectors were made by" in err
    assert main(["search", QUERY, "--hybrid", "--sparse-model", str(minilm_path), *common]) == 2
    assert "makes no sparse vectors" in capsys.readouterr().err
    assert main(["ingest", str(SAMPLES / "nature"), "--sparse-model", str(splade_path), *common]) == 2
    assert "--sparse-model goes with --hybrid" in capsys.readouterr().err


def _eval_args(kind: str, tmp_path: Path, model: Path) -> list[str]:
    """``poolrag eval`` on a fresh tiny BEIR set, with its own cache file."""
    dataset = write_dataset(tmp_path / "beir")
    cache = ["--cache", str(tmp_path / "c.sqlite")]
    return [
        "eval",
        str(dataset),
        *_common(kind, tmp_path, model),
        *cache,
        "-k",
        str(K),
        "--chunk-tokens",
        "32",
        "-q",
    ]


# Qdrant only: the random tiny SPLADE sets ~20k weights per text, which Milvus Lite searches slowly
# enough to hit its RPC deadline on a loaded machine (it passes there when given time, in ~4 minutes).
@pytest.mark.parametrize("kind", ["qdrant"])
def test_eval_with_a_sparse_model_prints_hand_computed_metrics(
    kind: str, tmp_path: Path, minilm_path: Path, minilm_engine, splade_path: Path, capsys
) -> None:
    args = [*_eval_args(kind, tmp_path, minilm_path), "--sparse-model", str(splade_path)]
    assert main([*args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["dense", "sparse", "hybrid"]

    # its own collection: the sparse model's path, its runs of other characters as _
    collection = "eval_beir_sparse_" + re.sub(r"[^A-Za-z0-9_]+", "_", str(splade_path)).strip("_")
    store = open_store(kind, collection, **_where(kind, tmp_path))
    try:
        assert store.read_spec().sparse == "learned"
        embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
        retriever = Retriever(store, embedder, sparse_encoder=LearnedSparseChunkEncoder(Engine(splade_path)))
        for mode in printed:
            run = {q: by_document(retriever.search(t, 3 * K, mode=mode)) for q, t in QUERIES.items()}
            assert printed[mode] == pytest.approx(hand_metrics(run, K), abs=1e-12), mode
    finally:
        store.close()

    assert main(args) == 0
    assert "(0 embedded now)" in capsys.readouterr().out.splitlines()[0]


def test_eval_gives_each_sparse_source_a_collection_of_its_own(
    tmp_path: Path, minilm_path: Path, splade_path: Path, other_splade_path: Path, capsys
) -> None:
    """eval's own collection was eval_<folder> whatever made the sparse field: after a BM25 run, eval
    --sparse-model X was refused as 'sparse field bm25 vs learned' (advice: another --collection, which
    eval then keeps as the user's, unpruned), and after X, --sparse-model Y as X's fingerprint, naming
    no way out. Each source now gets its own, as each BM25 analyzer did; going back re-embeds nothing."""
    args = [*_eval_args("qdrant", tmp_path, minilm_path), "--modes", "sparse"]
    sources = {
        "bm25": [],
        "x": ["--sparse-model", str(splade_path)],
        "y": ["--sparse-model", str(other_splade_path)],
    }
    collections, printed = {}, {}
    for source in ("bm25", "x", "y", "bm25", "x"):
        capsys.readouterr()
        assert main([*args, *sources[source]]) == 0, capsys.readouterr().err
        header = capsys.readouterr().out.splitlines()[0]
        collection = header.rsplit("in collection ", 1)[1].strip("'")
        assert collections.setdefault(source, collection) == collection
        if source in printed:
            assert "(0 embedded now)" in header  # its own collection, as it was left
        printed[source] = header
    assert len(set(collections.values())) == 3 and collections["bm25"] == default_collection(
        str(tmp_path / "beir")
    )
    recorded = {}
    for source, collection in collections.items():
        store = open_store("qdrant", collection, path=str(tmp_path / "q"))
        try:
            spec = store.read_spec()
            recorded[source] = (spec.sparse, spec.model_options.get("learned_sparse", {}).get("model_name"))
        finally:
            store.close()
    assert recorded == {
        "bm25": ("bm25", None),
        "x": ("learned", str(splade_path)),
        "y": ("learned", str(other_splade_path)),
    }
