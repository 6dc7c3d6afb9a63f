"""Documents are chunked ahead on one thread: each document's chunks come back whole and in order,
a chunker's error surfaces where its chunks stop, at most ``max_chunks`` wait per document, closing
stops the thread mid-document, and in a pipeline the next documents are chunked while the store
is still writing."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder
from poolrag.ingest import DenseEncoder, Document, IngestPipeline, TokenChunker
from poolrag.ingest.chunk_ahead import ChunkAhead
from poolrag.stores import open_store


def _slow_chunks(doc: int) -> Iterator[tuple[int, int]]:
    rng = random.Random(doc)
    for i in range(rng.randrange(0, 9)):
        time.sleep(rng.random() / 500)
        yield doc, i


def test_each_documents_chunks_come_back_whole_and_in_submission_order() -> None:
    ahead: ChunkAhead[int, tuple[int, int]] = ChunkAhead(_slow_chunks, max_chunks=3)
    seen = []
    try:
        for doc in range(30):
            ahead.submit(doc)
            if len(ahead) > 4:
                seen.append(ahead.take())
        while ahead:
            seen.append(ahead.take())
        out = [(doc, list(chunks)) for doc, chunks in seen]
    finally:
        ahead.close()
    assert [doc for doc, _ in out] == list(range(30))
    assert all(chunks == list(_slow_chunks(doc)) for doc, chunks in out)


def test_a_chunkers_error_is_raised_where_its_chunks_stop_and_earlier_documents_are_whole() -> None:
    def chunks_of(doc: str) -> Iterator[str]:
        yield f"{doc}-0"
        if doc == "bad":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        yield f"{doc}-1"

    ahead: ChunkAhead[str, str] = ChunkAhead(chunks_of, max_chunks=8)
    try:
        for doc in ("a", "bad", "c"):
            ahead.submit(doc)
        doc, chunks = ahead.take()
        assert (doc, list(chunks)) == ("a", ["a-0", "a-1"])
        doc, chunks = ahead.take()
        assert doc == "bad" and next(chunks) == "bad-0"
        with pytest.raises(UnicodeDecodeError):
            next(chunks)
        doc, chunks = ahead.take()  # the thread goes on: the caller decides whether the run stops
        assert (doc, list(chunks)) == ("c", ["c-0", "c-1"])
    finally:
        ahead.close()


def test_at_most_max_chunks_wait_while_the_reader_is_busy_and_close_stops_a_blocked_thread() -> None:
    made = itertools.count()
    produced = []

    def endless(_: str) -> Iterator[int]:
        while True:
            n = next(made)
            produced.append(n)
            yield n

    ahead: ChunkAhead[str, int] = ChunkAhead(endless, max_chunks=5)
    ahead.submit("huge")
    _, chunks = ahead.take()
    assert [next(chunks) for _ in range(3)] == [0, 1, 2]
    time.sleep(0.3)  # the thread fills the queue, then waits
    assert len(produced) <= 3 + 5 + 1 + 1  # read, waiting, one in hand, the marker's slot
    ahead.close()
    assert not any(t.name.startswith("poolrag-ingest-chunk") for t in threading.enumerate())


class _GatedChunker(TokenChunker):
    """Chunking ``gated`` waits (a few seconds at most) until the store is writing."""

    def __init__(self, *args, gated: str, writing: threading.Event, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gated, self.writing = gated, writing
        self.passed = threading.Event()
        self.saw_writing = False

    def iter_chunks(self, document, piece_chars=None):  # type: ignore[override]
        if document.source == self.gated:
            self.saw_writing = self.writing.wait(5)
            self.passed.set()
        return super().iter_chunks(document, piece_chars)


def test_documents_admitted_ahead_are_chunked_while_the_store_is_writing(
    tmp_path: Path, minilm_engine
) -> None:
    docs = [Document(f"note-{i}.txt", f"Note {i}: the kettle boiled at {i} past nine.") for i in range(12)]
    writing = threading.Event()
    chunker = _GatedChunker(
        minilm_engine.tokenizer, max_tokens=40, overlap=6, gated="note-5.txt", writing=writing
    )
    store = open_store("qdrant", "notes", path=str(tmp_path / "qdrant"))
    write = store.upsert
    chunked_during_write = []

    def upsert(records) -> None:  # the first write waits until the gated document was chunked
        if not writing.is_set():
            writing.set()
            chunked_during_write.append(chunker.passed.wait(5))
        write(records)

    store.upsert = upsert  # type: ignore[method-assign]
    pipe = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(minilm_engine, None)),
        chunker,
        batch_size=2,
        progress=False,
        checkpoint_dir=tmp_path,
    )
    report = pipe.run(docs)
    assert chunker.saw_writing and chunked_during_write == [True]
    assert report.upserted == 12 and store.count() == 12
    store.close()
