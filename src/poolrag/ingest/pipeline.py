"""The ingestion pipeline: documents → chunks → (cached) embeddings → batched upserts.

Order of work, and why:
  1. Open (or create and check) the collection first: a wrong model/size or an unreachable
     database fails before anything is embedded or written.
  2. List the ids already stored; chunk every document; only chunks whose id is missing are
     embedded and upserted (re-runs add nothing; the cache makes moved chunks free).
  3. Upsert in batches. When all of a document's new chunks are stored, its stale chunks (from an
     older version of the same source) are deleted and the document is checkpointed.
  4. With ``prune``, chunks of sources not seen in this run are deleted at the end.
A killed run resumes from the checkpoint; a batch that fails is retried whole (ids make upserts
idempotent), and when the database stays unreachable the run stops with
:class:`~poolrag.stores.StoreUnavailableError`, leaving only complete batches behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from poolrag.errors import InvalidInputError
from poolrag.ingest.checkpoint import Checkpoint, default_checkpoint_path, document_digest
from poolrag.ingest.chunker import Chunk, TokenChunker
from poolrag.ingest.encoders import ChunkEncoder
from poolrag.ingest.readers import Document
from poolrag.stores.base import ChunkRecord, CollectionSpec, Quantization, VectorStore

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
    deleted: int = 0
    resumed: bool = False
    seconds: float = 0.0
    collection: dict[str, object] = field(default_factory=dict)

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
        self.spec = CollectionSpec(
            name=store.collection,
            dimension=encoder.dimension,
            model_identity=encoder.model_identity,
            full_dimension=encoder.full_dimension,
            model_name=encoder.model_name,
            layout=encoder.layout,  # type: ignore[arg-type]
            quantization=quantization,
            model_options=dict(model_options or {}),
        )
        self.run_key = {
            "store": store.name,
            "location": str(store.location),
            "collection": store.collection,
            "model": encoder.model_identity,
            "dimension": encoder.dimension,
            "chunking": [chunker.max_tokens, chunker.overlap],
        }
        if checkpoint_path is None:
            from poolrag.cache.sqlite_store import default_cache_path

            root = Path(checkpoint_dir) if checkpoint_dir is not None else default_cache_path().parent
            checkpoint_path = default_checkpoint_path(root, self.run_key)
        self.checkpoint_path = Path(checkpoint_path)

    def run(self, documents: Iterable[Document], *, prune: bool = False) -> IngestReport:
        started = time.monotonic()
        report = IngestReport()
        stored_spec = self.store.ensure_collection(self.spec)
        report.collection = {"name": stored_spec.name, "dimension": stored_spec.dimension}
        existing = self.store.list_sources()
        by_source: dict[str, set[str]] = {}
        for cid, source in existing.items():
            by_source.setdefault(source, set()).add(cid)
        checkpoint = Checkpoint.open(self.checkpoint_path, self.run_key)
        report.resumed = checkpoint.resumed

        # Chunk everything first: the progress bar then knows the total and shows a real ETA.
        seen_sources: set[str] = set()
        todo: list[Chunk] = []
        pending: dict[str, tuple[str, int, set[str]]] = {}  # source -> (digest, chunks left, stale ids)
        done_now: dict[str, str] = {}
        for doc in _iter_docs(documents, self.progress):
            if doc.source in seen_sources:
                raise InvalidInputError(
                    f"two documents share the source {doc.source!r}; sources must be unique"
                )
            seen_sources.add(doc.source)
            report.documents += 1
            digest = document_digest(doc.text)
            if checkpoint.is_done(doc.source, digest):
                report.documents_skipped += 1
                continue
            chunks = self.chunker.split(doc)
            report.chunks += len(chunks)
            ids = {c.id for c in chunks}
            new = [c for c in chunks if c.id not in existing]
            report.chunks_existing += len(chunks) - len(new)
            stale = by_source.get(doc.source, set()) - ids
            if new:
                pending[doc.source] = (digest, len(new), stale)
                todo.extend(new)
            else:
                self._delete(stale, report)
                done_now[doc.source] = digest
        if done_now:
            checkpoint.mark_done(done_now)

        bar = _progress(self.progress, total=len(todo), desc="embedding + upserting", unit="chunk")
        computed_before = self.encoder.computed
        try:
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start : start + self.batch_size]
                vectors = self.encoder.encode([c.text for c in batch])
                self.store.upsert(
                    [ChunkRecord(c.id, v, c.payload()) for c, v in zip(batch, vectors, strict=True)]
                )
                report.upserted += len(batch)
                report.embedded = self.encoder.computed - computed_before
                finished: dict[str, str] = {}
                for chunk in batch:
                    digest, left, stale = pending[chunk.source]
                    if left == 1:
                        self._delete(stale, report)
                        finished[chunk.source] = digest
                        del pending[chunk.source]
                    else:
                        pending[chunk.source] = (digest, left - 1, stale)
                if finished:
                    checkpoint.mark_done(finished)
                bar.update(len(batch))
        finally:
            bar.close()

        if prune:
            orphans = [cid for cid, source in existing.items() if source not in seen_sources]
            self._delete(orphans, report)
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

    def _delete(self, ids: Iterable[str], report: IngestReport) -> None:
        ids = list(ids)
        if ids:
            self.store.delete(ids)
            report.deleted += len(ids)


def _iter_docs(documents: Iterable[Document], progress: bool) -> Iterable[Document]:
    total = len(documents) if hasattr(documents, "__len__") else None  # type: ignore[arg-type]
    return _progress(progress, iterable=documents, total=total, desc="chunking", unit="doc")
