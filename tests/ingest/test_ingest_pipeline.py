"""IngestPipeline against real Milvus Lite and Qdrant local mode: idempotent, incremental, guarded."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_support import TOPICS, write_corpus

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.errors import InvalidInputError
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, from_iterable, read_paths
from poolrag.ingest.checkpoint import Checkpoint, checkpointed
from poolrag.ingest.driver import document_version
from poolrag.retrieval import Retriever
from poolrag.stores import CollectionMismatchError, RetryPolicy, StoreUnavailableError, open_store

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
KINDS = ["milvus", "qdrant", "qdrant-edge"]


def _location(kind: str, root: Path) -> dict[str, str]:
    return {"uri": str(root / "milvus.db")} if kind == "milvus" else {"path": str(root / kind)}


class Setup:
    """One store + cache + pipeline under a tmp folder, reopened the way separate runs would."""

    def __init__(self, kind: str, root: Path, engine, dimensions: int | None = None) -> None:
        self.kind, self.root, self.engine, self.dimensions = kind, root, engine, dimensions
        self.corpus = write_corpus(root / "corpus")
        self.store = None

    def pipeline(self, max_tokens: int = 24, **kwargs) -> tuple[IngestPipeline, CachedEmbedder]:
        if self.store is not None:
            self.store.close()
        self.store = open_store(self.kind, "docs", retry=FAST_RETRY, **_location(self.kind, self.root))
        embedder = self.embedder()
        chunker = TokenChunker(self.engine.tokenizer, max_tokens=max_tokens, overlap=4)
        pipe = IngestPipeline(
            self.store,
            DenseEncoder(embedder, self.dimensions),
            chunker,
            batch_size=4,
            checkpoint_dir=self.root / "ck",
            progress=False,
            **kwargs,
        )
        return pipe, embedder

    def embedder(self) -> CachedEmbedder:
        return CachedEmbedder(self.engine, EmbeddingCache(self.root / "cache.sqlite"))

    def run(self, prune: bool = False):
        pipe, embedder = self.pipeline()
        report = pipe.run(read_paths([self.corpus]), prune=prune)
        assert report.embedded == embedder.misses
        return report

    def expected_ids(self, max_tokens: int = 24) -> set[str]:
        chunker = TokenChunker(self.engine.tokenizer, max_tokens=max_tokens, overlap=4)
        return {c.id for d in read_paths([self.corpus]) for c in chunker.split(d)}


@pytest.fixture
def setup(request, tmp_path: Path, minilm_engine):
    s = Setup(request.param, tmp_path, minilm_engine)
    yield s
    if s.store is not None:
        s.store.close()


@pytest.mark.parametrize("setup", KINDS, indirect=True)
def test_ingest_search_and_reingest_adds_nothing(setup: Setup) -> None:
    first = setup.run()
    ids = setup.expected_ids()
    assert first.chunks == first.upserted == first.embedded == len(ids) > len(list(setup.corpus.iterdir()))
    assert setup.store.count() == len(ids) and set(setup.store.list_sources()) == ids
    hits = Retriever(setup.store, setup.embedder()).search("how do bees show where the flowers are", k=3)
    assert hits[0].source.endswith("bees.md") and any("waggle dance" in h.text for h in hits)
    assert setup.corpus.joinpath("bees.md").read_text()[hits[0].start : hits[0].end] == hits[0].text

    again = setup.run()
    assert (again.upserted, again.embedded, again.deleted) == (0, 0, 0)
    assert again.chunks_existing == len(ids) and setup.store.count() == len(ids)


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_editing_one_document_reembeds_only_its_changed_chunk(setup: Setup) -> None:
    setup.run()
    before = setup.expected_ids()
    path = setup.corpus / "tides.txt"
    path.write_text(path.read_text().replace("tides are smaller", "tides are weaker"))
    report = setup.run()
    after = setup.expected_ids()
    assert len(after - before) == 1
    assert (report.embedded, report.upserted, report.deleted) == (1, 1, 1)
    assert set(setup.store.list_sources()) == after and setup.store.count() == len(after)


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_removed_documents_are_deleted_only_with_prune(setup: Setup) -> None:
    setup.run()
    total = setup.store.count()
    (setup.corpus / "chess.txt").unlink()
    assert setup.run().deleted == 0 and setup.store.count() == total
    pruned = setup.run(prune=True)
    assert pruned.deleted > 0 and setup.store.count() == total - pruned.deleted
    assert not any(src.endswith("chess.txt") for src in setup.store.list_sources().values())


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_run_without_prune_counts_the_files_gone_from_disk_once_each(setup: Setup, caplog) -> None:
    """A sheet's rows are one file gone, not one per row; a document of the caller's own naming that
    this run did not give is no file, so it is not said to be gone (nor is a file still on disk)."""
    (setup.corpus / "faq.csv").write_text("question,answer\nWho runs payroll?,Finance\nVPN?,The wiki\n")
    setup.run()
    pipe, _ = setup.pipeline()
    pipe.run(from_iterable([("notes-1", "Standup moved to ten.")]))
    (setup.corpus / "faq.csv").unlink()
    (setup.corpus / "chess.txt").unlink()
    caplog.clear()
    pipe, _ = setup.pipeline()
    report = pipe.run(read_paths([setup.corpus]))
    chess_chunks = sum(src.endswith("chess.txt") for src in setup.store.list_sources().values())
    assert (report.files_gone, report.chunks_of_files_gone, report.deleted) == (2, 2 + chess_chunks, 0)
    gone = ", ".join(str((setup.corpus / name).resolve()) for name in ("chess.txt", "faq.csv"))
    assert f"2 files stored by an earlier run are gone from disk ({gone}); " in caplog.text


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_documents_of_the_callers_own_are_never_said_to_be_files_gone_from_disk(setup: Setup, caplog) -> None:
    """A caller's source that looks like an absolute path (a wiki's '/kb/notes-1') names no file: a
    later run of other documents does not call it a file gone from disk, nor urge --prune for it."""
    pipe, _ = setup.pipeline()
    pipe.run(from_iterable([("/kb/notes-1", "Standup moved to ten.")]))
    caplog.clear()
    pipe, _ = setup.pipeline()
    report = pipe.run(from_iterable([("/kb/notes-2", "Lunch moved to noon.")]))
    assert (report.files_gone, report.chunks_of_files_gone) == (0, 0)
    assert "gone from disk" not in caplog.text


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_document_of_invisible_text_only_is_warned_of_as_a_file_is(setup: Setup, caplog) -> None:
    """A caller's Document of zero-width characters (a scraped page's \u200b line) cuts into no
    chunk: said in one warning naming it, as the CLI says of such a file, not dropped unsaid."""
    pipe, _ = setup.pipeline()
    caplog.clear()
    report = pipe.run(
        from_iterable([("/kb/blank", "\u200b\u200b\ufeff"), ("/kb/ok", "Lunch moved to noon.")])
    )
    assert report.documents_without_text == 1 and report.documents == 1
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ["/kb/blank has no text (empty, or only whitespace): it adds no chunks"]


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_folder_whose_files_are_all_gone_says_so(setup: Setup, caplog) -> None:
    setup.run()
    stored = set(setup.store.list_sources().values())
    for file in setup.corpus.iterdir():
        file.unlink()
    caplog.clear()
    pipe, _ = setup.pipeline()
    report = pipe.run(read_paths([setup.corpus]))
    assert report.files_gone == len(stored) and report.deleted == 0
    assert f"{len(stored)} files stored by an earlier run are gone from disk" in caplog.text


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_prune_keeps_the_chunks_of_a_folder_that_could_not_be_listed(setup: Setup, unlistable) -> None:
    """A subfolder that cannot be listed is a skipped path, not a deleted one."""
    sub = setup.corpus / "more"
    sub.mkdir()
    (sub / "octopus.txt").write_text("Octopuses have three hearts and blue blood.")
    setup.run()
    total = setup.store.count()
    unlistable(sub)
    pipe, _ = setup.pipeline()
    skipped: list = []
    report = pipe.run(read_paths([setup.corpus], skipped=skipped), prune=True, skipped=skipped)
    assert report.deleted == 0 and setup.store.count() == total
    assert [s for s in report.skipped if "cannot list the folder" in s and s.startswith(str(sub))]


def test_python_iterables_ingest_like_files(tmp_path: Path, minilm_engine) -> None:
    setup = Setup("qdrant", tmp_path, minilm_engine)
    pipe, _ = setup.pipeline()
    docs = [
        ("faq-1", "Reset your password from the account page."),
        ("faq-2", "Invoices are emailed monthly."),
    ]
    assert pipe.run(from_iterable(docs)).upserted == 2
    assert sorted(setup.store.list_sources().values()) == ["faq-1", "faq-2"]
    setup.store.close()


def test_a_document_no_model_can_read_is_skipped_and_the_rest_stored(tmp_path: Path, minilm_engine) -> None:
    """Issue 27, item 3: a lone surrogate costs its own document, named in the report, not the run."""
    setup = Setup("qdrant", tmp_path, minilm_engine)
    pipe, _ = setup.pipeline()
    docs = [("a", "Bees dance."), ("sur", "lone \ud800 surrogate escape"), ("b", "Tides turn.")]
    report = pipe.run(from_iterable(docs))
    assert sorted(setup.store.list_sources().values()) == ["a", "b"]
    assert report.skipped == ["sur: 'text' is not valid Unicode (lone surrogate at character 5)"]
    setup.store.close()


def test_a_models_own_matryoshka_size_is_the_size_stored(tmp_path: Path, minilm_path) -> None:
    """Issue 28, item 5: with no ``dimensions``, the collection takes the size ``embed`` returns
    (the pooler's ``dimensions``, filled by ``PoolingParams.verify``), not the full width."""
    from poolrag import Engine

    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True}, pooler_config={"dimensions": 64})
    setup = Setup("qdrant", tmp_path, engine)
    pipe, _ = setup.pipeline()
    assert pipe.run(from_iterable([("faq-1", "Reset your password from the account page.")])).upserted == 1
    query = engine.embed_array(["password reset"])[0]
    assert query.shape == (64,)
    [hit] = setup.store.search(query, 1)
    assert hit.payload["source"] == "faq-1"
    setup.store.close()


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_a_different_model_or_size_is_refused_before_anything_is_embedded(setup: Setup, minilm_path) -> None:
    from poolrag import Engine

    setup.run()
    count = setup.store.count()
    setup.engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True})
    setup.dimensions = 64
    pipe, embedder = setup.pipeline()
    with pytest.raises(CollectionMismatchError, match=r"384-dimension .* 64-dimension"):
        pipe.run(read_paths([setup.corpus]))
    assert embedder.misses == 0 and setup.store.count() == count


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_database_down_retries_then_fails_clearly_with_nothing_written(
    kind: str, tmp_path: Path, minilm_engine
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    embedder = CachedEmbedder(minilm_engine, cache)
    location = (
        {"uri": f"http://127.0.0.1:{port}"} if kind == "milvus" else {"url": f"http://127.0.0.1:{port}"}
    )
    with pytest.raises(StoreUnavailableError, match="is unavailable") as err:
        store = open_store(kind, "docs", retry=FAST_RETRY, **location)
        IngestPipeline(
            store,
            DenseEncoder(embedder),
            TokenChunker(minilm_engine.tokenizer, max_tokens=24),
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        ).run(read_paths([write_corpus(tmp_path / "corpus")]))
    assert err.value.attempts == 3
    assert embedder.misses == 0 and len(cache) == 0  # failed before embedding anything
    assert not (tmp_path / "ck").exists()  # and before writing a checkpoint


@pytest.mark.parametrize("setup", ["qdrant", "milvus"], indirect=True)
def test_a_file_deleted_or_rewritten_after_it_was_listed_is_left_out_not_the_run(setup: Setup) -> None:
    """Files are listed first and read when their turn comes; one deleted, or rewritten as another
    encoding, in between is left out with its reason, its stored chunks kept even by prune (seen
    from outside: 'No such file or directory' stopped the run, a UnicodeDecodeError was a traceback)."""
    first = setup.run()
    gone, garbled = sorted(setup.corpus.iterdir())[:2]
    for changed in (gone, garbled):  # a new version, so that this run reads them
        changed.write_text(changed.read_text() + "\nA line added later.")
    documents = list(read_paths([setup.corpus]))  # listed (and their digests taken) now
    gone.unlink()
    garbled.write_bytes("café".encode("latin-1"))
    pipe, _ = setup.pipeline()
    report = pipe.run(documents, prune=True)
    reasons = {Path(line.split(": ", 1)[0]).name: line.split(": ", 1)[1] for line in report.skipped}
    assert reasons == {
        gone.name: "cannot read: No such file or directory (it changed after it was listed)",
        garbled.name: "not UTF-8 text (unexpected end of data): it changed after it was listed",
    }
    # left out, so not among the documents ingested (nor named by their resolved paths)
    assert report.documents == first.documents - 2 and report.deleted == 0
    assert sorted(line.split(": ", 1)[0] for line in report.skipped) == sorted([str(gone), str(garbled)])
    assert setup.store.count() == first.upserted  # the two files' stored chunks are still there


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_prune_keeps_a_skipped_files_chunks_with_the_skip_list_given_once(setup: Setup) -> None:
    """``run(read_paths(folder, skipped=[]), prune=True)``: the reader's list goes with its documents
    (seen from outside: without ``skipped=`` passed to run as well, prune deleted the file's chunks)."""
    first = setup.run()
    latin1 = sorted(setup.corpus.iterdir())[0]
    latin1.write_bytes("café".encode("latin-1"))
    pipe, _ = setup.pipeline()
    report = pipe.run(read_paths(setup.corpus, skipped=[]), prune=True)
    assert [line.split(": ", 1)[0] for line in report.skipped] == [str(latin1)]
    assert report.deleted == 0 and setup.store.count() == first.upserted


def _checkpoint_claiming_every_document(setup: Setup) -> None:
    """What a run killed after it checkpointed the whole corpus leaves in the checkpoint folder."""
    pipe, _ = setup.pipeline()
    done = {doc.source: document_version(doc) for doc in read_paths([setup.corpus])}
    Checkpoint(pipe.checkpoint_path, pipe.driver.run_key).mark_done(done)


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_a_checkpoint_is_not_trusted_for_a_database_that_no_longer_holds_its_work(setup: Setup) -> None:
    """Seen from outside: an ingest was killed, its database deleted to start over, and the next run
    said '(resumed)' and stored 277 of 468 chunks, exiting 0."""
    _checkpoint_claiming_every_document(setup)
    report = setup.run()
    assert not report.resumed and report.documents_skipped == 0
    assert setup.store.count() == len(setup.expected_ids())


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_checkpointed_document_whose_chunks_are_gone_is_ingested_again(setup: Setup) -> None:
    setup.run()
    chess = [cid for cid, source in setup.store.list_sources().items() if source.endswith("chess.txt")]
    setup.store.delete(chess)
    _checkpoint_claiming_every_document(setup)
    report = setup.run()
    assert report.resumed and report.upserted == len(chess)
    assert setup.store.count() == len(setup.expected_ids())


def _more_documents(setup: Setup, count: int = 8) -> None:
    """More files than the pipeline chunks ahead, so a run stopped partway has stored some."""
    for i, (name, text) in zip(range(count), sorted(TOPICS.items()) * 2, strict=False):
        (setup.corpus / f"more-{i}-{name}").write_text(f"Note {i}. {text}")


def _stopped_after(documents, count: int):
    """The documents up to ``count``, then Ctrl-C: the run stops there, checkpointing what it stored."""
    for i, doc in enumerate(documents):
        if i == count:
            raise KeyboardInterrupt
        yield doc


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_a_stopped_runs_checkpoint_does_not_skip_documents_another_run_has_chunked_since(
    setup: Setup,
) -> None:
    """Stopped at 24-token chunks, run to its end at 48, run again at 24: the stopped run's checkpoint
    named the documents it had done, whose chunks the 48-token run has replaced; skipping them left
    those documents in 48-token chunks under a run that said it had ingested 24-token ones."""
    _more_documents(setup)
    pipe, _ = setup.pipeline()
    with pytest.raises(KeyboardInterrupt):
        pipe.run(_stopped_after(read_paths([setup.corpus]), 10))
    assert checkpointed(pipe.checkpoint_path)  # it had stored some
    pipe, _ = setup.pipeline(max_tokens=48)
    pipe.run(read_paths([setup.corpus]))
    pipe, _ = setup.pipeline()
    report = pipe.run(read_paths([setup.corpus]))
    assert report.documents_skipped == 0
    assert set(setup.store.list_sources()) == setup.expected_ids()


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_stopped_run_resumed_skips_the_documents_it_had_done(setup: Setup) -> None:
    _more_documents(setup)
    pipe, _ = setup.pipeline()
    with pytest.raises(KeyboardInterrupt):
        pipe.run(_stopped_after(read_paths([setup.corpus]), 10))
    done = len(checkpointed(pipe.checkpoint_path))
    report = setup.run()
    assert report.resumed and report.documents_skipped == done > 0 and report.embedded < report.chunks
    assert set(setup.store.list_sources()) == setup.expected_ids()


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_resumed_runs_chunks_count_those_of_the_documents_it_found_done(setup: Setup) -> None:
    """The documents the stopped run had done are among the resumed run's documents, so their stored
    chunks are among its chunks, as already stored: 'ingested 61 documents: 649 chunks' over a
    collection of 709 read as 60 chunks lost, where a clean run of the same files says 709."""
    _more_documents(setup)
    pipe, _ = setup.pipeline()
    with pytest.raises(KeyboardInterrupt):
        pipe.run(_stopped_after(read_paths([setup.corpus]), 10))
    report = setup.run()
    assert report.resumed and report.documents_skipped > 0
    assert report.chunks == setup.store.count() == len(setup.expected_ids())
    assert report.chunks == report.chunks_existing + report.upserted


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_prune_over_a_folder_with_no_document_deletes_nothing(setup: Setup) -> None:
    """An unmounted share is an empty folder: pruning it would empty the collection."""
    setup.run()
    total = setup.store.count()
    for path in setup.corpus.iterdir():
        path.unlink()
    with pytest.raises(
        InvalidInputError, match="--prune would delete every chunk of docs: nothing was deleted"
    ):
        setup.run(prune=True)
    assert setup.store.count() == total


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_prune_says_why_a_records_file_with_a_bad_line_keeps_its_deleted_records(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    feed = setup.corpus / "tickets.jsonl"
    feed.write_text(
        '{"id": "A", "text": "Printer jams on tray 2."}\n{"id": "B", "text": "VPN drops at noon."}\n'
    )
    setup.run()
    feed.write_text('{"id": "A", "text": "Printer jams on tray 2."}\nnot json\n')
    pipe, _ = setup.pipeline()
    with caplog.at_level("WARNING", logger="poolrag.ingest.driver"):
        report = pipe.run(read_paths(setup.corpus, skipped=[]), prune=True)
    assert report.deleted == 0 and any(
        source.endswith("tickets.jsonl#B") for source in setup.store.list_sources().values()
    )
    assert any(
        "tickets.jsonl: records deleted from it are not pruned" in record.getMessage()
        for record in caplog.records
    )


@pytest.mark.parametrize("setup", ["milvus", "qdrant"], indirect=True)
def test_a_row_deleted_from_a_sheet_leaves_the_collection_with_the_next_run(setup: Setup) -> None:
    """The sheet is the document the user edited: its rows not in it any more go, as an edited
    document's old chunks do, without --prune (seen from outside: a sheet without an id column named
    its rows by line, and deleting one left the row below it in the collection twice)."""
    sheet = setup.corpus / "faq.csv"
    rows = [
        "How do I reset my password?,Use the link on the login page",
        "Where is the VPN guide?,On the wiki",
    ]
    sheet.write_text("question,answer\n" + "\n".join(["Who runs payroll?,Finance", *rows]) + "\n")
    setup.run()
    sheet.write_text("question,answer\n" + "\n".join(rows) + "\n")
    report = setup.run()
    sources = sorted({s for s in setup.store.list_sources().values() if "faq.csv#" in s})
    assert [s.rsplit("#", 1)[1] for s in sources] == ["2", "3"] and report.deleted > 0
    assert setup.store.count() == len(setup.expected_ids())
    hits = Retriever(setup.store, setup.embedder()).search("reset my password", k=5)
    assert [h.source.rsplit("#", 1)[1] for h in hits if "faq.csv#" in h.source].count("2") == 1
    assert sum("reset my password" in h.text for h in hits) == 1


@pytest.mark.parametrize("setup", ["qdrant"], indirect=True)
def test_a_record_removed_from_a_feed_goes_unless_a_line_of_it_cannot_be_read(setup: Setup) -> None:
    feed = setup.corpus / "tickets.jsonl"
    a, b = '{"id": "A", "text": "Printer jams on tray 2."}', '{"id": "B", "text": "VPN drops at noon."}'
    feed.write_text(f"{a}\n{b}\n")
    setup.run()
    feed.write_text(f"{a}\nnot json\n")  # B may be the line that cannot be read: kept
    pipe, _ = setup.pipeline()
    assert pipe.run(read_paths(setup.corpus, skipped=[])).deleted == 0
    feed.write_text(f"{a}\n")
    assert setup.run().deleted == 1
    assert not any(source.endswith("tickets.jsonl#B") for source in setup.store.list_sources().values())


def test_an_ingest_into_qdrant_edge_leaves_its_shard_optimised(tmp_path: Path, tiny_model) -> None:
    """An edge shard has no background optimiser: the run's end runs it (here the vacuum of 40% of
    1,200 points pruned), so the shard opened afterwards has nothing left to optimise."""
    import qdrant_edge as qe

    from poolrag import Engine
    from poolrag.ingest import Document

    engine = Engine(tiny_model("bert"), tune="off")
    docs = [Document(f"note-{n}.txt", f"note {n}: the kettle boils at {n} degrees") for n in range(1200)]

    def ingest(documents: list, prune: bool = False):
        store = open_store("qdrant-edge", "notes", retry=FAST_RETRY, path=str(tmp_path / "edge"))
        try:
            chunker = TokenChunker(engine.tokenizer, max_tokens=32, overlap=4)
            encoder = DenseEncoder(CachedEmbedder(engine))
            pipe = IngestPipeline(store, encoder, chunker, checkpoint_dir=tmp_path, progress=False)
            return pipe.run(documents, prune=prune)
        finally:
            store.close()

    assert ingest(docs).upserted == 1200
    assert ingest(docs[:720], prune=True).deleted == 480
    shard = qe.EdgeShard.load(str(tmp_path / "edge" / "notes" / "shard"))
    try:
        assert shard.info().points_count == 720
        assert shard.optimize() is False
    finally:
        shard.close()


def _payloads(store) -> dict[str, dict]:
    """Every stored payload by source (one chunk each here)."""
    found: dict[str, dict] = {}
    store.scan_payloads(lambda page: found.update({p["source"]: p for _, p in page}))
    return found


@pytest.mark.parametrize("setup", KINDS, indirect=True)
def test_a_change_to_a_documents_fields_alone_rewrites_its_payload_and_embeds_nothing(
    setup: Setup,
) -> None:
    """Seen from outside: a record's url, a sheet's other columns and a page's <title> changed with
    the text left as it was, and every re-run said 'up to date', keeping the old payload for good."""
    feed, sheet, page = setup.corpus / "links.jsonl", setup.corpus / "staff.csv", setup.corpus / "page.html"
    feed.write_text('{"id": "A", "text": "Printer jams on tray 2.", "url": "http://old/a", "n": 1.5}\n')
    sheet.write_text("name,team,text\nAda,ops,Keeps the pagers quiet.\n")
    page.write_text("<title>Old title</title><p>Pelicans dive for fish.</p>")
    first = setup.run()
    ids = set(setup.store.list_sources())
    feed.write_text('{"id": "A", "text": "Printer jams on tray 2.", "url": "http://new/a", "n": 2}\n')
    sheet.write_text("name,team,text\nAda,infra,Keeps the pagers quiet.\n")
    page.write_text("<title>New title</title><p>Pelicans dive for fish.</p>")
    report = setup.run()
    assert (report.embedded, report.deleted, report.upserted) == (0, 0, 3)
    assert set(setup.store.list_sources()) == ids and report.chunks_existing == first.chunks - 3
    stored = _payloads(setup.store)
    by_name = {source.rsplit("/", 1)[1]: payload for source, payload in stored.items()}
    assert (by_name["links.jsonl#A"]["url"], by_name["links.jsonl#A"]["n"]) == ("http://new/a", 2)
    assert by_name["staff.csv#2"]["team"] == "infra" and by_name["page.html"]["title"] == "New title"
    again = setup.run()
    assert (again.upserted, again.embedded, again.deleted) == (0, 0, 0)


@pytest.mark.parametrize("setup", KINDS, indirect=True)
def test_fields_of_every_kind_come_back_as_written_so_a_rerun_writes_nothing(setup: Setup) -> None:
    """The payload a store hands back is compared with the one a run would write: a value the store
    keeps in another type (a float, an integer past 2**53, text with a NUL) must not read as changed."""
    record = {
        "id": "R",
        "text": "Tea is steeped in hot water.",
        "f": 1.0,
        "small": 1e-300,
        "big": 2**64 - 1,
        "low": -(2**63),
        "yes": True,
        "none": None,
        "odd": "é\x00\u200b",
        "": "empty key",
        "vector": "a store's column name",
    }
    import json

    (setup.corpus / "kinds.jsonl").write_text(json.dumps(record) + "\n")
    setup.run()
    again = setup.run()
    assert (again.upserted, again.embedded, again.deleted) == (0, 0, 0)
