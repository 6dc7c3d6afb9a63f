"""The ingestion pipeline: documents → chunks → (cached) embeddings → batched upserts.

Order of work, and why:
  1. Open (or create and check) the collection first: a wrong model/size or an unreachable
     database fails before anything is embedded or written. A *new* collection with a BM25
     sparse field is created with the first batch, whose mean length it records (see
     :mod:`poolrag.ingest.sparse_encoders`); the database has been reached by then all the same.
  2. List the ids already stored; read and chunk documents one at a time, a piece at a time (a
     large file never sits in memory whole); only chunks whose id is missing are embedded and
     upserted (re-runs add nothing; the cache makes moved chunks free).
  3. Upsert in batches as chunks come. A batch is embedded (and its vectors cached) on a worker
     thread while this thread writes the previous batch to the store and chunks the next one, so
     store writes overlap the forward pass; at most one batch is being embedded and one written. When a
     document is fully read and all its new chunks are stored (the store acknowledged the write),
     its stale chunks (from an older version of the same source) are deleted and the document is
     checkpointed. All store calls stay on the calling thread.
  4. With ``prune``, chunks of sources not seen in this run are deleted at the end.
A killed run resumes from the checkpoint; a batch that fails is retried whole (ids make upserts
idempotent), and when the database stays unreachable the run stops with
:class:`~poolrag.stores.StoreUnavailableError`, leaving only complete batches behind; the vectors
of the batch being embedded at that moment still reach the cache, so a re-run does not pay for
them again.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from poolrag.errors import InvalidInputError
from poolrag.ingest.checkpoint import Checkpoint, default_checkpoint_path
from poolrag.ingest.chunker import Chunk, TokenChunker
from poolrag.ingest.encoders import ChunkEncoder
from poolrag.ingest.readers import Document, FileDocument, SkippedFile
from poolrag.ingest.sparse_encoders import SparseChunkEncoder
from poolrag.ingest.stored_ids import StoredIds
from poolrag.stores.base import ChunkRecord, CollectionSpec, Quantization, VectorStore
from poolrag.text_validity import lone_surrogate

logger = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What a run did. Of the ``chunks`` read, ``chunks_existing`` were already stored (skipped) and
    ``upserted`` were written: ``embedded`` of them computed now (cache misses), ``from_cache`` with
    vectors the cache already held."""

    documents: int = 0
    documents_skipped: int = 0
    chunks: int = 0
    chunks_existing: int = 0
    upserted: int = 0
    embedded: int = 0
    sparse_computed: int = 0  # chunks whose sparse vector needed the tokenizer/model (not the cache)
    deleted: int = 0
    resumed: bool = False
    seconds: float = 0.0
    collection: dict[str, object] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "path: reason" of files left out

    @property
    def from_cache(self) -> int:
        """Chunks upserted with vectors the embedding cache already held (nothing computed)."""
        return max(self.upserted - self.embedded, 0)

    @property
    def chunks_per_second(self) -> float:
        return self.upserted / self.seconds if self.seconds > 0 else 0.0


def _progress(enabled: bool, **kwargs: object) -> tqdm:
    return tqdm(disable=not enabled, dynamic_ncols=True, **kwargs)


class IngestPipeline:
    """Fill one collection from documents.

    Args:
        store: the collection to fill (opened by :func:`poolrag.stores.open_store`).
        encoder: :class:`~poolrag.ingest.encoders.DenseEncoder` or ``ColbertEncoder``.
        chunker: splits documents; its ``max_tokens`` must fit the model.
        sparse_encoder: also write a sparse vector per chunk (hybrid search):
            :class:`~poolrag.ingest.sparse_encoders.BM25ChunkEncoder` or
            :class:`~poolrag.ingest.sparse_encoders.LearnedSparseChunkEncoder`; dense layout only.
        batch_size: chunks per embed + upsert step (and per checkpoint).
        quantization: ``int8`` / ``binary`` index compression for a new collection.
        model_options: recorded in the collection so search can load the model the same way.
        checkpoint_path: where progress is saved; default under the cache folder.
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
    ) -> None:
        if batch_size <= 0:
            raise InvalidInputError("batch size must be positive")
        if quantization not in (None, "int8", "binary"):
            raise InvalidInputError(f"quantization must be 'int8' or 'binary', not {quantization!r}")
        self.store = store
        self.encoder = encoder
        self.chunker = chunker
        self.batch_size = batch_size
        self.progress = progress
        self.sparse_encoder = sparse_encoder
        self.spec = CollectionSpec(
            name=store.collection,
            dimension=encoder.dimension,
            model_identity=encoder.model_identity,
            full_dimension=encoder.full_dimension,
            model_name=encoder.model_name,
            layout=encoder.layout,  # type: ignore[arg-type]
            quantization=quantization,
            model_options=dict(model_options or {}),
            sparse=sparse_encoder.kind if sparse_encoder is not None else None,  # type: ignore[arg-type]
        )
        self.run_key = {
            "store": store.name,
            "location": str(store.location),
            "collection": store.collection,
            "model": encoder.model_identity,
            "dimension": encoder.dimension,
            "chunking": [chunker.max_tokens, chunker.overlap],
        }
        if sparse_encoder is not None:
            self.run_key["sparse"] = sparse_encoder.run_identity
        self._collection_ready = False
        if checkpoint_path is None:
            from poolrag.cache.sqlite_store import default_cache_path

            root = Path(checkpoint_dir) if checkpoint_dir is not None else default_cache_path().parent
            checkpoint_path = default_checkpoint_path(root, self.run_key)
        self.checkpoint_path = Path(checkpoint_path)

    def run(
        self,
        documents: Iterable[Document | FileDocument],
        *,
        prune: bool = False,
        skipped: Sequence[SkippedFile] = (),
    ) -> IngestReport:
        """Ingest ``documents`` one at a time: memory holds two batches of chunks (one being
        embedded, one being written) and one piece of the document being read, whatever the
        corpus size.

        ``skipped``: files the reader left out (filled while ``documents`` is read); their chunks
        are kept by ``prune``, since an unreadable file is not a deleted one.
        """
        started = time.monotonic()
        report = IngestReport()
        self._collection_ready = False
        stored = self.store.read_spec()
        if stored is not None or self.sparse_encoder is None:
            # A new collection with a sparse field waits for the first batch: it records the
            # average chunk length BM25 normalises by. Reading the spec already reached the database.
            self._open_collection(report, [])
        checkpoint = Checkpoint.open(self.checkpoint_path, self.run_key)
        report.resumed = checkpoint.resumed
        stored_ids = StoredIds.beside(self.checkpoint_path)
        try:
            if self._collection_ready:
                stored_ids.fill(self.store.scan_sources)
            self._run(documents, report, checkpoint, stored_ids, prune, skipped)
        finally:
            stored_ids.close()
        checkpoint.remove()
        report.seconds = time.monotonic() - started
        logger.info(
            "ingested %d documents into %s/%s: %d chunks, %d upserted, %d embedded, %d deleted in %.1fs",
            report.documents,
            self.store.name,
            self.store.collection,
            report.chunks,
            report.upserted,
            report.embedded,
            report.deleted,
            report.seconds,
        )
        return report

    def _run(
        self,
        documents: Iterable[Document | FileDocument],
        report: IngestReport,
        checkpoint: Checkpoint,
        stored_ids: StoredIds,
        prune: bool,
        skipped: Sequence[SkippedFile],
    ) -> None:
        """The body of :meth:`run`, with the ids stored at the start in ``stored_ids`` (on disk)."""
        run = _Run(self, report, checkpoint, stored_ids)
        left_out: list[str] = []  # documents whose text no model can read
        finished = False
        try:
            for doc in _iter_docs(documents, self.progress):
                stored_ids.see(doc.source)
                if isinstance(doc, Document) and (position := lone_surrogate(doc.text)) is not None:
                    # This document only (its stored chunks stay); the ones after it are ingested.
                    reason = f"text is not valid Unicode (lone surrogate at character {position})"
                    logger.warning("skipping %s: %s", doc.source, reason)
                    left_out.append(f"{doc.source}: {reason}")
                    continue
                report.documents += 1
                digest = doc.digest
                if checkpoint.is_done(doc.source, digest):
                    report.documents_skipped += 1
                    continue
                state = _Pending(digest)
                run.pending[doc.source] = state
                for chunk in self.chunker.iter_chunks(doc):
                    report.chunks += 1
                    if stored_ids.keep(chunk.id):
                        report.chunks_existing += 1
                        continue
                    state.left += 1
                    run.add(chunk)
                state.chunked = True
                run.finish_if_done(doc.source)
            run.flush()
            run.drain()
            finished = True
            if not self._collection_ready:
                self._open_collection(report, [])
        finally:
            if not finished:
                run.abandon()
            run.close()
            run.save()

        report.skipped = [str(s) for s in skipped] + left_out
        if prune:
            kept = [Path(s.path).resolve().as_posix() for s in skipped]
            for orphans in stored_ids.orphans(lambda source: _under(source, kept)):
                self._delete(orphans, report)

    def _open_collection(self, report: IngestReport, first_batch: Sequence[str]) -> None:
        """Create or check the collection; a sparse encoder adopts the settings it recorded (or
        fixes them from ``first_batch`` and records them in a new collection)."""
        spec = self.spec
        if self.sparse_encoder is not None:
            stored = self.store.read_spec()
            key = self.sparse_encoder.options_key
            recorded = stored.model_options.get(key) if stored is not None else None
            self.sparse_encoder.adopt(recorded if isinstance(recorded, dict) else None, first_batch)
            options = {**spec.model_options, key: self.sparse_encoder.settings()}
            spec = dataclasses.replace(spec, model_options=options)
        stored_spec = self.store.ensure_collection(spec)
        report.collection = {"name": stored_spec.name, "dimension": stored_spec.dimension}
        if stored_spec.sparse is not None:
            report.collection["sparse"] = stored_spec.sparse
        self._collection_ready = True

    def _delete(self, ids: Iterable[str], report: IngestReport) -> None:
        ids = list(ids)
        if ids:
            self.store.delete(ids)
            report.deleted += len(ids)


def _iter_docs(documents: Iterable[Any], progress: bool) -> Iterable[Any]:
    total = len(documents) if hasattr(documents, "__len__") else None  # type: ignore[arg-type]
    return _progress(progress, iterable=documents, total=total, desc="ingesting", unit="doc")


def _under(source: str, resolved: list[str]) -> bool:
    """Whether ``source`` is one of the ``resolved`` paths, a JSONL record of one (``path#id``) or a
    file inside one (a folder that could not be listed)."""
    return any(source == p or source.startswith((f"{p}#", f"{p}/")) for p in resolved)


@dataclass
class _Pending:
    """A document being written: new chunks not yet stored (its stored ones are in the ledger)."""

    digest: str
    left: int = 0
    chunked: bool = False


@dataclass
class _Embedded:
    """A batch handed to the embedding thread, and its dense and sparse vectors to come."""

    batch: list[Chunk]
    vectors: Future[tuple[list[np.ndarray], list[Any]]]


class _Run:
    """The batch being filled and the documents in flight of one :meth:`IngestPipeline.run`.

    A full batch goes to a one-thread executor to be embedded (:meth:`flush`); the encoders write
    their caches there as each batch is computed (a few ms, and a ``kill -9`` loses nothing paid
    for). The batch embedded before it is written to the store meanwhile, on this thread
    (:meth:`_write`), so the forward pass of batch k+1 overlaps the store write of batch k and the
    chunking of batch k+2.
    """

    def __init__(
        self, pipeline: IngestPipeline, report: IngestReport, checkpoint: Checkpoint, stored_ids: StoredIds
    ) -> None:
        self.pipeline = pipeline
        self.report = report
        self.checkpoint = checkpoint
        self.stored_ids = stored_ids
        self.pending: dict[str, _Pending] = {}
        self.batch: list[Chunk] = []
        self.finished: dict[str, str] = {}
        self.computed_before = pipeline.encoder.computed
        sparse = pipeline.sparse_encoder
        self.sparse_before = sparse.computed if sparse is not None else 0
        self.embedding: _Embedded | None = None
        self._executor: ThreadPoolExecutor | None = None

    def add(self, chunk: Chunk) -> None:
        self.batch.append(chunk)
        if len(self.batch) >= self.pipeline.batch_size:
            self.flush()

    def flush(self) -> None:
        """Start embedding the batch, then write the one embedded before it."""
        batch, self.batch = self.batch, []
        if batch:
            pipeline = self.pipeline
            sparse = pipeline.sparse_encoder
            texts = [c.text for c in batch]
            if not pipeline._collection_ready:
                pipeline._open_collection(self.report, texts)
            if sparse is not None:
                sparse.adopt(None, texts)  # a collection made elsewhere recorded no length
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="poolrag-ingest-embed")
            embedded = _Embedded(batch, self._executor.submit(self._embed, batch))
            previous, self.embedding = self.embedding, embedded
            if previous is not None:
                self._write(previous)
        self.save()

    def _embed(self, batch: list[Chunk]) -> tuple[list[np.ndarray], list[Any]]:
        """On the embedding thread: dense (and sparse) vectors of a batch, cached as computed."""
        encoder, sparse = self.pipeline.encoder, self.pipeline.sparse_encoder
        texts = [c.text for c in batch]
        vectors = encoder.encode(texts, [c.token_ids for c in batch])
        sparse_vectors = sparse.encode(texts) if sparse is not None else [None] * len(batch)
        return vectors, sparse_vectors

    def _write(self, embedded: _Embedded) -> None:
        """Store the vectors of ``embedded``; once the store acknowledged them, count the batch and
        checkpoint the documents it completed."""
        pipeline, batch = self.pipeline, embedded.batch
        vectors, sparse_vectors = embedded.vectors.result()
        self._count_computed()
        pipeline.store.upsert(
            [
                ChunkRecord(c.id, v, c.payload(), sparse=s)
                for c, v, s in zip(batch, vectors, sparse_vectors, strict=True)
            ]
        )
        self.report.upserted += len(batch)
        for chunk in batch:
            self.pending[chunk.source].left -= 1
        for source in dict.fromkeys(c.source for c in batch):
            self.finish_if_done(source)

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
        self.save()

    def abandon(self) -> None:
        """After a failure: let the batch being embedded finish (its vectors reach the cache, so
        nothing paid for is lost) and write nothing more to the store."""
        embedded, self.embedding = self.embedding, None
        if embedded is not None and embedded.vectors.exception() is None:
            self._count_computed()

    def close(self) -> None:
        """Stop the embedding thread (after :meth:`drain` or :meth:`abandon`)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def finish_if_done(self, source: str) -> None:
        state = self.pending[source]
        if state.chunked and state.left == 0:
            self.pipeline._delete(self.stored_ids.stale(source), self.report)
            self.finished[source] = state.digest
            del self.pending[source]

    def save(self) -> None:
        if self.finished:
            self.checkpoint.mark_done(self.finished)
            self.finished = {}
