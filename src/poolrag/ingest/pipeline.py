"""The ingestion pipeline: documents → chunks → (cached) embeddings → batched upserts.

Order of work, and why:
The run around the embedding (collection, document bookkeeping, checkpoint, prune, report) is
:class:`~poolrag.ingest.driver.IngestDriver`'s, shared with the Ray path; this module embeds.

  1. Open (or create and check) the collection first: a wrong model/size or an unreachable
     database fails before anything is embedded or written. A *new* collection with a BM25
     sparse field records its mean chunk length once the first batch fixes it (see
     :mod:`poolrag.ingest.sparse_encoders`).
  2. List the ids already stored; read and chunk documents one at a time, a piece at a time (a
     large file never sits in memory whole); only chunks whose id is missing are embedded and
     upserted (re-runs add nothing; the cache makes moved chunks free).
  3. Upsert in batches as chunks come. Three threads, one stage each: documents are read and
     chunked a few ahead on one (:mod:`~poolrag.ingest.chunk_ahead`), a batch is embedded (and its
     vectors cached) on another, and this thread writes the previous batch to the store, so store
     writes, chunking and the forward pass overlap; at most one batch is being embedded and one
     written. When a document is fully read and all its new chunks are stored (the store
     acknowledged the write), its stale chunks (from an older version of the same source) are
     deleted and the document is checkpointed. All store calls stay on the calling thread.
  4. With ``prune``, chunks of sources not seen in this run are deleted at the end.
A killed run resumes from the checkpoint; a batch that fails is retried whole (ids make upserts
idempotent), and when the database stays unreachable the run stops with
:class:`~poolrag.stores.StoreUnavailableError`, leaving only complete batches behind; the vectors
of the batch being embedded at that moment still reach the cache, so a re-run does not pay for
them again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from poolrag.counts import check_count
from poolrag.errors import InvalidImageError, InvalidInputError
from poolrag.ingest.chunk_ahead import ChunkAhead
from poolrag.ingest.chunker import Chunk, TokenChunker, chunk_id
from poolrag.ingest.driver import IngestDriver, IngestReport
from poolrag.ingest.encoders import ChunkEncoder, DenseEncoder
from poolrag.ingest.readers import (
    Document,
    FileDocument,
    PathDocuments,
    SkippedFile,
    changed_since_listed,
    warn_no_text,
)
from poolrag.ingest.sparse_encoders import SparseChunkEncoder
from poolrag.ingest.visual_documents import ImageDocument, PdfDocument, VisualDocument
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.stores.base import ChunkRecord, CollectionSpec, Quantization, VectorStore
from poolrag.stores.vector_types import VectorType

logger = logging.getLogger(__name__)

# Admitted documents chunked ahead of the one being batched: enough that the chunking thread
# moves on to the next documents while this thread waits on a store write, few enough that
# a run stopped by an error has admitted little past it.
_DOCUMENTS_AHEAD = 4


class IngestPipeline:
    """Fill one collection from documents.

    Args:
        store: the collection to fill (opened by :func:`poolrag.stores.open_store`).
        encoder: :class:`~poolrag.ingest.encoders.DenseEncoder` or ``ColbertEncoder``.
        chunker: splits documents; its ``max_tokens`` must fit the model.
        late_chunking: embed each document's chunks in one pass over the document (mean pooled
            per chunk, :meth:`~poolrag.Engine.embed_chunks`); ids and payloads are unchanged.
        sparse_encoder: also write a sparse vector per chunk (hybrid search):
            :class:`~poolrag.ingest.sparse_encoders.BM25ChunkEncoder` or
            :class:`~poolrag.ingest.sparse_encoders.LearnedSparseChunkEncoder`; dense layout only.
        batch_size: chunks per embed + upsert step (and per checkpoint); default 64.
        quantization: ``int8`` / ``binary`` index compression for a new collection.
        model_options: recorded in the collection so search can load the model the same way.
        checkpoint_path: where progress is saved; default under ``checkpoint_dir``.
        checkpoint_dir: where the default checkpoint goes (``checkpoints/``, a file per store,
            collection and model); default the cache folder.
        progress: a progress bar on stderr while :meth:`run` goes (when it knows the total).
        vector_type: what each vector is stored as: ``float32``, or ``float16`` / ``uint8`` exactly as
            the server sends them (:mod:`poolrag.stores.vector_types`); ``None``: the existing
            collection's, else float32.
        ranges: uint8's fixed scale (``poolrag calibrate``'s file, or the model's own).
    """

    def __init__(
        self,
        store: VectorStore,
        encoder: ChunkEncoder,
        chunker: TokenChunker,
        *,
        batch_size: int = 64,
        quantization: Quantization | None = None,
        model_options: dict[str, object] | None = None,
        checkpoint_path: str | Path | None = None,
        checkpoint_dir: str | Path | None = None,
        progress: bool = True,
        sparse_encoder: SparseChunkEncoder | None = None,
        late_chunking: bool = False,
        vector_type: VectorType | None = None,
        ranges: QuantizationRanges | None = None,
    ) -> None:
        check_count(batch_size, "batch_size")
        if late_chunking and not isinstance(encoder, DenseEncoder):
            raise InvalidInputError(
                "late chunking pools one vector per chunk: it needs a dense (not ColBERT) model"
            )
        if late_chunking and isinstance(encoder, DenseEncoder) and (refusal := encoder.late_chunking_refusal):
            raise InvalidInputError(refusal)  # before the collection records late vectors
        self.late_chunking = late_chunking
        self.store = store
        self.encoder = encoder
        self.chunker = chunker
        self.batch_size = batch_size
        self.progress = progress
        self.sparse_encoder = sparse_encoder
        self.driver = IngestDriver(
            store,
            encoder,
            (chunker.max_tokens, chunker.overlap),
            quantization=quantization,
            model_options=model_options,
            checkpoint_path=checkpoint_path,
            checkpoint_dir=checkpoint_dir,
            sparse=sparse_encoder,
            late_chunking=late_chunking,
            vector_type=vector_type,
            ranges=ranges,
        )
        self.run_key = self.driver.run_key
        self.checkpoint_path = self.driver.checkpoint_path

    @property
    def spec(self) -> CollectionSpec:
        """The collection this pipeline writes (its vector type settled once a run has started)."""
        return self.driver.spec

    def run(
        self,
        documents: Iterable[Document | FileDocument | VisualDocument],
        *,
        prune: bool = False,
        skipped: Sequence[SkippedFile] = (),
        total: int | None = None,
    ) -> IngestReport:
        """Ingest ``documents`` in order: memory holds a few batches of chunks (one being embedded,
        one being written, one waiting per document chunked ahead) and one piece of the document
        being read, whatever the corpus size.

        ``skipped``: files the reader left out (filled while ``documents`` is read); their chunks
        are kept by ``prune``, since an unreadable file is not a deleted one. Unset, the list
        :func:`~poolrag.ingest.read_paths` carries (``documents.skipped``).
        ``total``: how many documents and ``skipped`` entries the run will see
        (:func:`~poolrag.ingest.readers.count_documents` counts them for files), else
        ``len(documents)`` where it has one: the progress bar's total. Without one there is no bar.
        """
        skipped = skipped or getattr(documents, "skipped", ())
        driver = self.driver
        driver.start()
        try:
            self._ingest(driver, documents, total, skipped)
            return driver.finish(
                prune=prune,
                skipped=skipped,
                record_files=getattr(documents, "record_files", ()),
                read_files=isinstance(documents, PathDocuments),
                excluded=getattr(documents, "excluded", None),
            )
        except BaseException:
            # whatever failed (a second Ctrl-C while the batch being embedded finishes, a checkpoint
            # that cannot be saved): the run's lock goes, so the next run in this process gets in
            driver.close()
            raise

    def _ingest(
        self,
        driver: IngestDriver,
        documents: Iterable[Document | FileDocument | VisualDocument],
        total: int | None,
        skipped: Sequence[SkippedFile],
    ) -> None:
        """Chunk, embed and store ``documents``; the checkpoint is saved however it ends."""
        if total is None and hasattr(documents, "__len__"):
            total = len(documents)  # type: ignore[arg-type]
        progress = _DocumentProgress(self.progress, total, driver, skipped)
        run = _Run(self, driver, progress)
        ahead: ChunkAhead[Document | FileDocument | VisualDocument, Chunk] = ChunkAhead(
            self._chunks, self.batch_size
        )
        finished = False
        try:
            for doc in documents:
                if driver.admit(doc):
                    ahead.submit(doc)
                    if len(ahead) > _DOCUMENTS_AHEAD:
                        run.add_document(*ahead.take())
                progress.advance()
            while ahead:
                run.add_document(*ahead.take())
            run.flush()
            run.drain()
            finished = True
        finally:
            ahead.close()
            if not finished:
                run.abandon()
            run.close()
            try:
                driver.save()
            finally:
                progress.close()

    def _chunks(self, doc: Document | FileDocument | VisualDocument) -> Iterable[Chunk]:
        """A text's token chunks, or an image's one chunk and a PDF's pages."""
        if isinstance(doc, (ImageDocument, PdfDocument)):
            if self.late_chunking:
                raise InvalidInputError(f"{doc.source}: late chunking reads texts, not images or PDF pages")
            return doc.chunks()
        chunks = self.chunker.iter_chunks(doc)
        return _with_document(doc, chunks) if self.late_chunking else chunks


def _with_document(doc: Document | FileDocument, chunks: Iterable[Chunk]) -> list[Chunk]:
    """The document's chunks, each carrying its whole text (late chunking reads it whole).

    A late vector depends on the whole document, so its id names the document's version too: an
    edited document's unchanged chunks are new rows (their old ones are deleted as stale), never
    left with vectors of the text before the edit."""
    text = doc.text  # one string shared by the chunks: the encoder groups them by it
    version = f"late\x00{doc.digest}\x00"
    return [
        replace(chunk, id=chunk_id(chunk.source, chunk.start, version + chunk.text), document=text)
        for chunk in chunks
    ]


class _DocumentProgress:
    """The run's one bar: documents done with (stored, found done by the checkpoint, left out by
    the driver or the reader) out of a total known when the run starts. A run whose total is not
    known (or is 0) draws none: a counter that cannot say how far along it is says nothing."""

    def __init__(
        self, enabled: bool, total: int | None, driver: IngestDriver, skipped: Sequence[Any]
    ) -> None:
        self.driver = driver
        self.skipped = skipped
        self._stored = 0
        self.bar = (
            tqdm(total=total, desc="ingesting", unit="doc", dynamic_ncols=True) if enabled and total else None
        )

    def advance(self) -> None:
        """Bring the bar to the documents done so far (after a document is read or a batch stored),
        with the chunks stored so far beside it: a long file is one document for minutes."""
        if self.bar is not None:
            done = self.driver.documents_done + len(self.skipped)
            stored = self.driver.report.upserted
            if stored != self._stored:
                self._stored = stored
                self.bar.set_postfix_str(f"{stored} chunks stored", refresh=done == self.bar.n)
            if done > self.bar.n:
                self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.advance()
            self.bar.close()


@dataclass
class _Vectors:
    """A batch's vectors: the chunks embedded, their dense and sparse vectors, and the documents
    left out because one of their pages or images could not be prepared (source → why)."""

    chunks: list[Chunk]
    dense: list[np.ndarray]
    sparse: list[Any]
    failed: dict[str, str]


class _Run:
    """The batch being filled and the documents in flight of one :meth:`IngestPipeline.run`.

    A full batch goes to a one-thread executor to be embedded (:meth:`flush`); the encoders write
    their caches there as each batch is computed (a few ms, and a ``kill -9`` loses nothing paid
    for). The batch embedded before it is written to the store meanwhile, on this thread
    (:meth:`_write`), so the forward pass of batch k+1 overlaps the store write of batch k and the
    chunking of batch k+2.
    """

    def __init__(self, pipeline: IngestPipeline, driver: IngestDriver, progress: _DocumentProgress) -> None:
        self.pipeline = pipeline
        self.driver = driver
        self.progress = progress
        self.report = driver.report
        self.batch: list[Chunk] = []
        self.computed_before = pipeline.encoder.computed
        sparse = pipeline.sparse_encoder
        self.sparse_before = sparse.computed if sparse is not None else 0
        self.embedding: Future[_Vectors] | None = None  # the batch on the embedding thread
        self._executor: ThreadPoolExecutor | None = None
        self.failed: set[str] = set()  # documents left out while embedded: no more of their chunks

    def add_document(self, doc: Document | FileDocument | VisualDocument, chunks: Iterable[Chunk]) -> None:
        """Batch an admitted document's new chunks; the driver counts every chunk. A file that
        fails while it is read (deleted or rewritten since it was listed) is left out, not the run."""
        iterator = iter(chunks)
        cut = 0
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                break
            except (OSError, UnicodeDecodeError) as exc:
                if not isinstance(doc, FileDocument):
                    raise
                self.batch = [c for c in self.batch if c.source != doc.source]
                self.driver.abandon(doc.source, changed_since_listed(exc))
                self.progress.advance()
                return
            cut += 1
            if self.driver.chunk(doc.source, chunk.id, chunk.payload()):
                self.batch.append(chunk)
                if len(self.batch) >= self.pipeline.batch_size:
                    self.flush()
                    if doc.source in self.failed:  # a page of it, embedded just now, failed
                        return
        if not cut and isinstance(doc, Document):  # a file's reader names it when listed
            warn_no_text(doc.source)
        self.driver.chunked(doc.source)
        self.progress.advance()

    def flush(self) -> None:
        """Start embedding the batch, then write the one embedded before it."""
        batch, self.batch = self.batch, []
        if batch:
            self.driver.fix_sparse([c.text for c in batch])
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="poolrag-ingest-embed")
            previous, self.embedding = self.embedding, self._executor.submit(self._embed, batch)
            if previous is not None:
                self._write(previous)
        self.driver.save()

    def _embed(self, batch: list[Chunk]) -> _Vectors:
        """On the embedding thread: dense (and sparse) vectors of a batch, cached as computed."""
        encoder, sparse = self.pipeline.encoder, self.pipeline.sparse_encoder
        failed: dict[str, str] = {}
        if self.pipeline.late_chunking:
            assert isinstance(encoder, DenseEncoder)
            vectors = encoder.encode_late(batch)
        else:  # an image chunk's input is its image (a PDF page is rendered here, off the reader)
            try:
                vectors = encoder.encode([c.model_input() for c in batch], [c.token_ids for c in batch])
            except InvalidInputError:
                if all(c.image is None for c in batch):
                    raise
                batch, vectors, failed = _each_apart(encoder, batch)
        texts = [c.text for c in batch]
        sparse_vectors = sparse.encode(texts) if sparse is not None and texts else [None] * len(batch)
        return _Vectors(batch, vectors, sparse_vectors, failed)

    def _write(self, embedded: Future[_Vectors]) -> None:
        """Store the vectors of ``embedded``; the driver counts the batch and checkpoints the
        documents it completed once the store acknowledged them. A document one of whose pages
        failed is left out (its pages stored before stay, as a file that failed while read)."""
        result = embedded.result()
        self._count_computed()
        for source, reason in result.failed.items():
            self._leave_out(source, reason)
        kept = [
            (c, v, s)
            for c, v, s in zip(result.chunks, result.dense, result.sparse, strict=True)
            if c.source not in self.failed
        ]
        records = [ChunkRecord(c.id, v, c.payload(), sparse=s) for c, v, s in kept]
        self.driver.write(records, [c.source for c, _, _ in kept])
        self.progress.advance()

    def _leave_out(self, source: str, reason: str) -> None:
        self.failed.add(source)
        self.batch = [c for c in self.batch if c.source != source]
        self.driver.abandon(source, reason)

    def _count_computed(self) -> None:
        self.report.embedded = self.pipeline.encoder.computed - self.computed_before
        sparse = self.pipeline.sparse_encoder
        if sparse is not None:
            self.report.sparse_computed = sparse.computed - self.sparse_before

    def drain(self) -> None:
        """Write the batch being embedded, if any (the end of a run)."""
        embedded, self.embedding = self.embedding, None
        if embedded is not None:
            self._write(embedded)
        self.driver.save()

    def abandon(self) -> None:
        """After a failure: let the batch being embedded finish (its vectors reach the cache, so
        nothing paid for is lost) and write nothing more to the store."""
        embedded, self.embedding = self.embedding, None
        if embedded is not None and embedded.exception() is None:
            self._count_computed()

    def close(self) -> None:
        """Stop the embedding thread (after :meth:`drain` or :meth:`abandon`)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _each_apart(
    encoder: ChunkEncoder, batch: list[Chunk]
) -> tuple[list[Chunk], list[np.ndarray], dict[str, str]]:
    """A batch one of whose images or pages could not be prepared (a render over pdfium's limits,
    an image the model's processor refuses), embedded one chunk at a time: the chunks embedded and
    their vectors, and each failed document with why (its other chunks are not embedded)."""
    kept: list[Chunk] = []
    vectors: list[np.ndarray] = []
    failed: dict[str, str] = {}
    for chunk in batch:
        if chunk.source in failed:
            continue
        try:
            (vector,) = encoder.encode([chunk.model_input()], [chunk.token_ids])
        except InvalidInputError as exc:
            if chunk.image is None:
                raise
            page = chunk.metadata.get("page")
            problem = exc.problem if isinstance(exc, InvalidImageError) else str(exc)
            failed[chunk.source] = problem if page is None else f"page {page}: {problem}"
            continue
        kept.append(chunk)
        vectors.append(vector)
    return kept, vectors, failed
