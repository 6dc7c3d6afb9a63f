"""Ingestion on a local 2-CPU Ray cluster writes what the single-process pipeline writes.

Same ids, sources and vectors (1e-6) in Milvus Lite and Qdrant local mode; the actors consult the
embedding cache the driver fills; a re-run adds nothing; an actor killed mid-run changes nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ray import cloudpickle

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.scaleout.ray_ingest import (
    MAX_BATCH_RUNS,
    BatchKillsWorkersError,
    BM25Recipe,
    ChunkEmbedder,
    EngineRecipe,
    RayIngestOptions,
    ingest_on_ray,
)
from poolrag.stores import open_store
from poolrag.testing.page_corpus import write_pdf

# The test's actor class travels to the workers by value (they cannot import this test module).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CHUNK_TOKENS, OVERLAP = 48, 8
WORDS = [
    "honey",
    "tide",
    "bread",
    "rust",
    "chess",
    "orbit",
    "lantern",
    "meadow",
    "copper",
    "violin",
    "glacier",
    "harbour",
]


def write_corpus(root: Path, files: int = 12) -> Path:
    """Files of several paragraphs each, so every file is cut into a few chunks."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        paragraphs = [
            " ".join(f"{WORDS[(n + p + k) % len(WORDS)]}{k % 7}" for k in range(30 + 5 * p)) + "."
            for p in range(3)
        ]
        (root / f"doc{n:02d}.md").write_text(f"# Document {n}\n\n" + "\n\n".join(paragraphs))
    return root


def write_records(root: Path, names: str) -> tuple[Path, list[str]]:
    """``faq.jsonl`` with one record per name in ``names``, and its lines (to write again without some)."""
    records = root / "faq.jsonl"
    lines = [json.dumps({"id": name, "text": f"{name} {' '.join(WORDS)}"}) for name in names]
    records.write_text("\n".join(lines) + "\n")
    return records, lines


def location(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "milvus.db")} if kind == "milvus" else {"path": str(root / "qdrant")}


def contents(store) -> dict[str, tuple[str, np.ndarray]]:
    sources = store.list_sources()
    vectors = store.fetch_vectors(list(sources))
    return {cid: (source, vectors[cid]) for cid, source in sources.items()}


def assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for cid, (source, vector) in want.items():
        assert got[cid][0] == source
        np.testing.assert_allclose(got[cid][1], vector, atol=1e-6, rtol=0)


#: the corpus's PDF: a text model reads its text layer, each chunk naming its page
PDF_PAGES = [
    "Sourdough needs a starter fed with flour and water.\nThe dough rises slowly overnight in a cool"
    " kitchen.\nBakers fold it gently to keep the bubbles.",
    "Glaciers carve valleys as they move downhill.\nIce grinds the rock beneath into fine flour.\n"
    "Meltwater carries the sediment to the sea.",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_corpus(tmp_path_factory.mktemp("corpus"))
    write_pdf(root / "report.pdf", PDF_PAGES)
    return root


@pytest.fixture(scope="module")
def recipe(minilm_path: Path) -> EngineRecipe:
    return EngineRecipe(str(minilm_path), chunk_tokens=CHUNK_TOKENS, overlap=OVERLAP)


@pytest.fixture(scope="module")
def single_process(minilm_engine, corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What one process writes (into Qdrant local; the stores agree on ids and vectors)."""
    root = tmp_path_factory.mktemp("single")
    store = open_store("qdrant", "docs", path=str(root / "qdrant"))
    chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, CHUNK_TOKENS, OVERLAP)
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(minilm_engine, None)),
        chunker,
        checkpoint_dir=root / "ck",
        progress=False,
    )
    report = pipeline.run(read_paths([corpus]))
    assert report.upserted == report.chunks > len(list(corpus.iterdir()))  # several chunks per file
    try:
        return contents(store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache") / "embeddings.sqlite"


@pytest.fixture(scope="module")
def qdrant_run(ray_cluster, recipe, corpus, single_process, shared_cache, tmp_path_factory) -> dict:
    """Ray into Qdrant local with an empty cache: everything is computed, and the driver caches it."""
    root = tmp_path_factory.mktemp("ray-qdrant")
    store = open_store("qdrant", "docs", **location("qdrant", root))
    with EmbeddingCache(shared_cache) as cache:
        report = ingest_on_ray(
            read_paths([corpus]), store, recipe, cache=cache, options=RayIngestOptions(workers=2)
        )
        cached = len(cache)
    return {"store": store, "report": report, "cached": cached, "root": root}


def test_qdrant_local_gets_the_single_process_ids_and_vectors(qdrant_run, single_process) -> None:
    report = qdrant_run["report"]
    assert report.chunks == report.upserted == report.embedded == len(single_process)
    assert report.documents == 13 and report.chunks_existing == 0 and report.deleted == 0
    assert qdrant_run["cached"] == len(single_process)  # the driver stored what the actors computed
    assert_same(contents(qdrant_run["store"]), single_process)


def test_a_pdfs_chunks_name_their_pages_as_in_one_process(qdrant_run, corpus: Path, minilm_engine) -> None:
    """The actors read a PDF's text from the driver's row, page starts and all."""
    store = qdrant_run["store"]
    (pdf,) = read_paths([corpus / "report.pdf"])
    chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, CHUNK_TOKENS, OVERLAP)
    want = {c.id: c.metadata["page"] for c in chunker.iter_chunks(pdf)}
    query = minilm_engine.embed_array([PDF_PAGES[1]])[0]
    got = {hit.id: hit.payload["page"] for hit in store.search(query, 100) if hit.payload.get("page")}
    assert got == want and sorted(want.values()) == [1, 2]


def test_a_rerun_adds_nothing(qdrant_run, recipe, corpus, single_process, shared_cache) -> None:
    store = qdrant_run["store"]
    with EmbeddingCache(shared_cache) as cache:
        report = ingest_on_ray(read_paths([corpus]), store, recipe, cache=cache)
    assert report.chunks == report.chunks_existing == len(single_process)
    assert report.upserted == report.embedded == report.deleted == 0
    assert_same(contents(store), single_process)


def test_milvus_lite_from_the_cache_the_actors_consult(
    qdrant_run, recipe, corpus, single_process, shared_cache, tmp_path: Path
) -> None:
    store = open_store("milvus", "docs", **location("milvus", tmp_path))
    try:
        with EmbeddingCache(shared_cache) as cache:
            report = ingest_on_ray(
                read_paths([corpus]), store, recipe, cache=cache, options=RayIngestOptions(workers=2)
            )
        assert report.upserted == len(single_process)
        assert report.embedded == 0  # every vector came from the cache file, none from the model
        assert_same(contents(store), single_process)
    finally:
        store.close()


class DiesOnce(ChunkEmbedder):
    """Exits its process on the first batch any actor of the job gets, once (a file is the flag)."""

    flag = ""

    def __call__(self, batch):
        try:
            os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return super().__call__(batch)
        os._exit(1)


def test_a_killed_actor_changes_nothing(ray_cluster, recipe, corpus, single_process, tmp_path: Path) -> None:
    flag = tmp_path / "died"
    actor = type("DiesOnceHere", (DiesOnce,), {"flag": str(flag)})
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        report = ingest_on_ray(
            read_paths([corpus]), store, recipe, options=RayIngestOptions(workers=2), embedder_class=actor
        )
        assert flag.exists()  # an actor did die mid-run
        assert report.upserted == report.chunks == len(single_process)
        assert store.count() == len(single_process)
        assert_same(contents(store), single_process)
    finally:
        store.close()


class SaysWhenBuilt(ChunkEmbedder):
    """Writes, in ``folder``, a file named by its process id once built, holding its torch threads."""

    folder = ""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        import torch

        Path(self.folder, str(os.getpid())).write_text(str(torch.get_num_threads()))


def test_no_more_actors_than_batches_each_with_the_cores_left_to_it(
    ray_cluster, recipe, corpus, single_process, tmp_path: Path
) -> None:
    """Two workers asked for and one document's batch: the second actor loaded the model and never
    embedded, holding half the cluster's CPUs the one that did could have used."""
    built = tmp_path / "built"
    built.mkdir()
    actor = type("SaysWhenBuiltHere", (SaysWhenBuilt,), {"folder": str(built)})
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        report = ingest_on_ray(
            read_paths([corpus / "doc03.md"]),
            store,
            recipe,
            options=RayIngestOptions(workers=2),
            embedder_class=actor,
        )
        assert report.documents == 1 and report.upserted == report.chunks > 1
        assert [path.read_text() for path in built.iterdir()] == ["2"]  # one actor, on both CPUs
        want = {cid: got for cid, got in single_process.items() if got[0] == str(corpus / "doc03.md")}
        assert_same(contents(store), want)
    finally:
        store.close()


class WaitsForTheOther(SaysWhenBuilt):
    """Holds its first batch until a second actor is built, and writes, in ``calls``, the process
    id of each batch's actor: the other actor is ready by the time the next batch is handed out."""

    calls = ""

    def __call__(self, batch):
        for _ in range(600):
            if len(list(Path(self.folder).iterdir())) >= 2:
                break
            time.sleep(0.2)
        with open(Path(self.calls, f"{len(batch['source'])}"), "w") as said:
            said.write(str(os.getpid()))
        return super().__call__(batch)


def test_each_batch_goes_to_an_actor_with_nothing_else_to_do(
    ray_cluster, recipe, corpus, single_process, tmp_path: Path
) -> None:
    """13 documents, batches of 8, two actors: the documents went as blocks of 7 and 6, which Ray
    Data bundles into one task of 13, and an actor took a second task while busy with its first,
    so one actor embedded everything while the other, its model loaded, waited."""
    built, calls = tmp_path / "built", tmp_path / "calls"
    built.mkdir()
    calls.mkdir()
    actor = type("WaitsForTheOtherHere", (WaitsForTheOther,), {"folder": str(built), "calls": str(calls)})
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        report = ingest_on_ray(
            read_paths([corpus]), store, recipe, options=RayIngestOptions(workers=2), embedder_class=actor
        )
        assert report.documents == 13
        by = {path.name: path.read_text() for path in calls.iterdir()}
        assert sorted(by) == ["5", "8"] and by["5"] != by["8"]  # a batch each
        assert_same(contents(store), single_process)
    finally:
        store.close()


class DiesOnPoison(ChunkEmbedder):
    """Exits its process on every batch holding a document named ``poison`` (as an out-of-memory
    kill would, each time that document is embedded)."""

    poison = ""

    def __call__(self, batch):
        if self.poison in batch["source"].tolist():
            self._count_run([str(source) for source in batch["source"]])
            os._exit(1)
        return super().__call__(batch)


def test_a_batch_that_kills_every_actor_stops_the_job_naming_it(
    ray_cluster, recipe, corpus, tmp_path: Path
) -> None:
    """Ray Data restarts a dead actor and runs its batch again for ever: the job reloaded the
    model in a loop (31 restarts in 4 minutes, still going)."""
    poison = str(corpus / "doc05.md")
    actor = type("DiesOnPoisonHere", (DiesOnPoison,), {"poison": poison})
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        with pytest.raises(
            BatchKillsWorkersError, match=f"embedding .*doc05.md.* died {MAX_BATCH_RUNS} times"
        ):
            ingest_on_ray(
                read_paths([corpus]),
                store,
                recipe,
                options=RayIngestOptions(workers=1, documents_per_batch=1),
                embedder_class=actor,
            )
        assert poison not in set(store.list_sources().values())
    finally:
        store.close()


def test_the_retry_options_ray_data_took_over_warn_and_change_nothing() -> None:
    with pytest.warns(DeprecationWarning, match="max_restarts"):
        options = RayIngestOptions(workers=2, max_restarts=3, max_task_retries=3)
    assert options.workers == 2  # Ray Data's own fault tolerance restarts actors (test above)


def test_a_record_gone_from_its_jsonl_file_is_deleted_as_in_one_process(
    ray_cluster, recipe, tmp_path: Path
) -> None:
    """A record no longer in a JSONL file read to its end loses its chunks without --prune (the
    single-process rule, tests/ingest): on Ray they stayed, answering searches for a deleted record."""
    records, lines = write_records(tmp_path, "abc")
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        ingest_on_ray(read_paths([records]), store, recipe, checkpoint_dir=tmp_path / "ck")
        assert sorted(store.list_sources().values()) == [f"{records}#{name}" for name in "abc"]
        records.write_text(lines[0] + "\n" + lines[2] + "\n")  # record b removed
        report = ingest_on_ray(read_paths([records]), store, recipe, checkpoint_dir=tmp_path / "ck")
        assert sorted(store.list_sources().values()) == [f"{records}#a", f"{records}#c"]
        assert report.deleted == 1 and report.upserted == report.embedded == 0
    finally:
        store.close()


def test_documents_read_ahead_pass_their_record_files_by_name(ray_cluster, recipe, tmp_path: Path) -> None:
    """Documents listed beforehand (a list, not what read_paths gives) lost the JSONL files they came
    from: ingest_on_ray read them off the documents, so a record gone from its file kept its chunks."""
    records, lines = write_records(tmp_path, "abc")
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        ingest_on_ray(read_paths([records]), store, recipe, checkpoint_dir=tmp_path / "ck")
        records.write_text(lines[0] + "\n" + lines[2] + "\n")  # record b removed
        documents = read_paths([records])
        listed = list(documents)
        report = ingest_on_ray(
            listed, store, recipe, checkpoint_dir=tmp_path / "ck", record_files=documents.record_files
        )
        assert sorted(store.list_sources().values()) == [f"{records}#a", f"{records}#c"]
        assert report.deleted == 1 and report.documents == 2
    finally:
        store.close()


def test_prune_keeps_a_left_out_files_chunks_as_in_one_process(ray_cluster, recipe, tmp_path: Path) -> None:
    """read_paths(skipped=[...]) carries the files it left out, which IngestPipeline.run keeps under
    prune without being handed the list again; on Ray they were pruned, an unreadable file taken
    for a deleted one."""
    corpus = write_corpus(tmp_path / "corpus", files=3)
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        ingest_on_ray(read_paths([corpus]), store, recipe, checkpoint_dir=tmp_path / "ck")
        before = store.list_sources()
        (corpus / "doc01.md").write_bytes(b"caf\xe9 au lait, not UTF-8")
        report = ingest_on_ray(
            read_paths([corpus], skipped=[]), store, recipe, prune=True, checkpoint_dir=tmp_path / "ck"
        )
        assert len(report.skipped) == 1 and report.skipped[0].startswith(str(corpus / "doc01.md"))
        assert report.deleted == 0 and store.list_sources() == before
    finally:
        store.close()


@pytest.mark.parametrize("bm25", [None, BM25Recipe("words", "english")], ids=["dense", "hybrid"])
def test_a_file_gone_since_it_was_listed_is_left_out_as_in_one_process(
    ray_cluster, recipe, tmp_path: Path, bm25: BM25Recipe | None
) -> None:
    """A file deleted (or rewritten unreadable) between listing and chunking is skipped with a warning
    and its stored chunks kept, as one process skips it (tests/ingest): on Ray the actor's
    FileNotFoundError stopped the whole job with Ray's traceback, and a hybrid run's driver raised it
    while fixing BM25's length."""
    corpus = write_corpus(tmp_path / "corpus", files=3)
    store = open_store("qdrant", "docs", **location("qdrant", tmp_path))
    try:
        ingest_on_ray(read_paths([corpus]), store, recipe, bm25=bm25, checkpoint_dir=tmp_path / "ck")
        before = store.list_sources()
        gone = corpus / "doc01.md"
        gone.write_text(gone.read_text() + "\n\nAn added paragraph.")
        listed = list(read_paths([corpus]))  # doc01.md listed with its new digest, then deleted
        gone.unlink()
        report = ingest_on_ray(listed, store, recipe, bm25=bm25, checkpoint_dir=tmp_path / "ck")
        assert report.skipped == [
            f"{gone}: cannot read: No such file or directory (it changed after it was listed)"
        ]
        assert report.documents == 2 and report.deleted == report.upserted == 0
        assert store.list_sources() == before  # doc01.md's stored chunks are kept
    finally:
        store.close()
    fresh = open_store("qdrant", "docs", path=str(tmp_path / "fresh"))  # a new collection: BM25's
    try:  # length is fixed from the first batch, read on the driver
        report = ingest_on_ray(listed, fresh, recipe, bm25=bm25, checkpoint_dir=tmp_path / "ck")
        assert len(report.skipped) == 1 and report.documents == 2
        assert set(fresh.list_sources().values()) == {str(corpus / "doc00.md"), str(corpus / "doc02.md")}
    finally:
        fresh.close()
