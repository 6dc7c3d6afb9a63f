"""The one ingest driver: collection, document bookkeeping, checkpoint, prune and report.

Whoever makes the vectors (:class:`~poolrag.ingest.IngestPipeline` on this process, Ray actors in
:mod:`poolrag.scaleout.ray_ingest`), the run around them is this one, so both write the same
collection spec, skip the same documents, delete the same stale and pruned chunks, resume from the
same checkpoint (its key names no executor: a run killed on Ray resumes on one machine and back)
and return the same :class:`IngestReport`. The driver embeds nothing; it is told which chunks a
document was cut into and which of them the store has acknowledged.

A document is checkpointed once it is fully chunked and all its new chunks are stored; only then
are its stale chunks (from an older version of the same source) deleted, so a killed run never
loses a chunk it did not replace.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from poolrag.errors import InvalidInputError
from poolrag.ingest.checkpoint import Checkpoint, default_checkpoint_path, remove_old_checkpoints
from poolrag.ingest.readers import CSV_SUFFIXES, JSONL_SUFFIXES, Document, FileDocument, SkippedFile
from poolrag.ingest.record_rules import metadata_problem, string_problem
from poolrag.ingest.run_lock import RunLock
from poolrag.ingest.sparse_encoders import SparseChunkEncoder
from poolrag.ingest.stored_ids import ChunkSet, StoredIds, payload_digest, payload_matches
from poolrag.model_facts import weights_fingerprint
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.printable import printable
from poolrag.stores.base import ChunkRecord, CollectionSpec, Quantization, VectorStore
from poolrag.stores.vector_types import VectorType, check_vector_type

if TYPE_CHECKING:
    from poolrag.ingest.visual_documents import VisualDocument

logger = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What a run did. Of the documents' ``chunks`` (a resumed run's done documents' included, as
    stored), ``chunks_existing`` were already stored (skipped) and ``upserted`` were written:
    ``embedded`` of them computed now (cache misses), ``from_cache`` with vectors the cache already
    held."""

    documents: int = 0
    documents_skipped: int = 0
    #: documents read that hold no text (an empty file): cut into no chunk, so not among ``documents``
    documents_without_text: int = 0
    #: files an earlier run stored that are gone from disk (deleted, renamed), and their chunks, which
    #: stay stored and found by search until a run with ``prune`` (0 in such a run: it deletes them)
    files_gone: int = 0
    chunks_of_files_gone: int = 0
    #: files an earlier run stored that this run's ``exclude`` patterns left out, and their chunks,
    #: stored and found by search as a gone file's are (0 in a run with ``prune``: it deletes them)
    files_excluded: int = 0
    chunks_of_files_excluded: int = 0
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


class VectorSource(Protocol):
    """What a collection records about the model behind its vectors (a chunk encoder has it)."""

    layout: str  # "dense" | "multivector"
    dimension: int
    full_dimension: int
    model_identity: str
    model_name: str
    model_outputs: str  # the model's output fingerprint: pooling, normalisation, tokenizer


@dataclass(frozen=True)
class VectorSourceFacts:
    """A :class:`VectorSource` as plain data, for a driver whose encoders run elsewhere (Ray actors)."""

    layout: str
    dimension: int
    full_dimension: int
    model_identity: str
    model_name: str
    model_outputs: str


@dataclass
class _Pending:
    """A document being written: its chunk ids so far, new chunks not yet stored, old ids."""

    digest: str
    left: int = 0
    cut: int = 0  # chunks it was cut into so far: none once chunked is a document without text
    chunked: bool = False
    shown: str = ""  # how the report names it: a file as the reader found it (under the path given)
    chunks: ChunkSet = field(default_factory=ChunkSet)  # every chunk id it was cut into


def stored_vectors_of_run(
    store: VectorStore, vector_type: str | None, ranges: QuantizationRanges | None, width: int
) -> tuple[str, list[list[float]] | None]:
    """The (type, uint8 ranges) a run writes. ``None`` means the collection's own type (a re-run need
    not repeat the flag), else float32; a uint8 run takes the given ranges at this width, else the
    ones the collection recorded, and is refused, naming where ranges come from, when it has neither."""
    stored = store.read_spec() if vector_type is None or (vector_type == "uint8" and ranges is None) else None
    if vector_type is None:
        vector_type = stored.vector_type if stored is not None else "float32"
    check_vector_type(vector_type)
    if vector_type != "uint8":
        return vector_type, None
    if ranges is not None:
        return vector_type, ranges.for_width(width).tolist()
    if stored is not None and stored.vector_type == "uint8":
        return vector_type, stored.vector_ranges
    raise InvalidInputError(
        "uint8 vectors need fixed ranges to bucket each dimension: measure them with 'poolrag calibrate' "
        "and pass --calibration FILE (or use a model folder that ships quantization_ranges.json)"
    )


class IngestDriver:
    """The bookkeeping of one collection's ingest runs; one :meth:`start` ... :meth:`finish` a run.

    Args:
        store: the collection to fill (opened by :func:`poolrag.stores.open_store`).
        source: the model behind the vectors (a chunk encoder, or :class:`VectorSourceFacts`).
        chunking: ``(max_tokens, overlap)`` of the chunker (part of the checkpoint's key).
        quantization: ``int8`` / ``binary`` index compression for a new collection.
        model_options: recorded in the collection so search can load the model the same way.
        checkpoint_path: where progress is saved; default under ``checkpoint_dir`` (else the cache folder).
        sparse: the sparse leg of a hybrid collection; it adopts the settings the collection
            recorded, or fixes them from the first batch (:meth:`fix_sparse`).
        late_chunking: the vectors are late-chunked; recorded, so a collection never mixes the two.
        vector_type: what each vector is stored as (``float32``, ``float16``, ``uint8``;
            :mod:`poolrag.stores.vector_types`); ``None``: the existing collection's, else float32.
        ranges: uint8's fixed per-dimension scale (``poolrag calibrate``'s file, or the model's own);
            a uint8 collection that exists already keeps the ranges it recorded.
    """

    def __init__(
        self,
        store: VectorStore,
        source: VectorSource,
        chunking: tuple[int, int],
        *,
        quantization: Quantization | None = None,
        model_options: dict[str, object] | None = None,
        checkpoint_path: str | Path | None = None,
        checkpoint_dir: str | Path | None = None,
        sparse: SparseChunkEncoder | None = None,
        late_chunking: bool = False,
        vector_type: VectorType | None = None,
        ranges: QuantizationRanges | None = None,
    ) -> None:
        if quantization not in (None, "int8", "binary"):
            raise InvalidInputError(f"quantization must be 'int8' or 'binary', not {quantization!r}")
        self.store = store
        self.sparse = sparse
        self.spec = CollectionSpec(
            name=store.collection,
            dimension=source.dimension,
            model_identity=source.model_identity,
            full_dimension=source.full_dimension,
            model_name=source.model_name,
            model_outputs=source.model_outputs,
            layout=source.layout,  # type: ignore[arg-type]
            quantization=quantization,
            model_options=dict(model_options or {}),
            sparse=sparse.kind if sparse is not None else None,  # type: ignore[arg-type]
            chunk_vectors="late" if late_chunking else "per_chunk",
        )
        self._vectors_asked = (vector_type, ranges)  # resolved against the collection by start()
        self.run_key: dict[str, object] = {
            "store": store.name,
            "location": str(store.location),
            "collection": store.collection,
            # the weights, not the name: a model named otherwise (./m, m/, another venv's packaged
            # copy after an upgrade) resumes the same checkpoint
            "model": weights_fingerprint(source.model_identity),
            "dimension": source.dimension,
            "chunking": list(chunking),
        }
        if sparse is not None:
            self.run_key["sparse"] = sparse.run_identity
        if late_chunking:  # other vectors for the same chunks: a checkpoint of its own
            self.run_key["late_chunking"] = True
        self._default_checkpoint = checkpoint_path is None  # its folder is poolrag's to tidy
        if checkpoint_path is None:
            from poolrag.cache.sqlite_store import default_cache_path

            root = Path(checkpoint_dir) if checkpoint_dir is not None else default_cache_path().parent
            checkpoint_path = default_checkpoint_path(root, self.run_key)
        self.checkpoint_path = Path(checkpoint_path).expanduser()  # "--checkpoint=~/x": no shell expanded it
        self.report = IngestReport()

    # -- the start of a run ---------------------------------------------------------------------------
    def start(self) -> None:
        """Create the collection or check it (a wrong model or an unreachable database fails before
        anything is embedded), list the ids already stored, and open the checkpoint.

        A new hybrid collection records its BM25 settings as pending: the run's first batch fixes the
        average chunk length they normalise by (and an undeclared language), :meth:`fix_sparse`.
        """
        self.close()  # a run of this driver that failed before it closed: its lock is this run's to take
        self._started = time.monotonic()
        self.report = IngestReport()
        self._refuse_another_size()
        kind, ranges = stored_vectors_of_run(self.store, *self._vectors_asked, self.spec.dimension)
        self.spec = dataclasses.replace(self.spec, vector_type=kind, vector_ranges=ranges)  # type: ignore[arg-type]
        self._open_collection()
        # one run per checkpoint (poolrag.ingest.run_lock), taken before the checkpoint is read
        Checkpoint(self.checkpoint_path, self.run_key).check_writable()
        where = f"{self.store.name} at {self.store.location}, collection {self.store.collection}"
        self._run_lock = RunLock(self.checkpoint_path, where).acquire()
        try:
            self._open_checkpoint()
        except BaseException:
            self.close()
            raise

    def _open_checkpoint(self) -> None:
        """Open the checkpoint, tidy the default folder, list the ids already stored."""
        self.checkpoint = Checkpoint.open(self.checkpoint_path, self.run_key)
        if self._default_checkpoint:
            remove_old_checkpoints(self.checkpoint_path.parent)
        self.report.resumed = self.checkpoint.resumed
        # The ids stored before the run, on disk beside the checkpoint (not in memory: a re-run over a
        # large collection would start hundreds of MB up); the stores hand them over page by page.
        self.stored_ids = StoredIds.beside(self.checkpoint_path)
        scan_payloads = getattr(self.store, "scan_payloads", None)
        if scan_payloads is not None:  # so a document whose fields changed is written again
            self.stored_ids.fill_payloads(scan_payloads)
        else:  # a store of the caller's own that does not hand payloads over: ids alone
            self.stored_ids.fill(self.store.scan_sources)
        if self.checkpoint.resumed and self.stored_ids.is_empty:
            # the interrupted run's database was deleted, or this is another one at the same path
            logger.warning(
                "the checkpoint %s is of a run into %s/%s, which holds nothing now: starting over",
                self.checkpoint_path,
                self.store.name,
                self.store.collection,
            )
            self.checkpoint.forget()
            self.report.resumed = False
        self._left_out: list[str] = []  # "name: reason" of the documents left out
        self._read_files = False  # a document read from a file was given (read_paths' own)
        self._pending: dict[str, _Pending] = {}
        self._finished: dict[str, str] = {}
        #: documents this run has done with: stored, found done by the checkpoint, or left out
        self.documents_done = 0

    def _refuse_another_size(self) -> None:
        """A run of another size into an existing collection refused as a size mismatch (naming the
        ``--dimensions`` it was written with), before a uint8 collection's ranges, recorded for its
        own size, are taken for this run's and refused as ranges of the wrong shape."""
        stored = self.store.read_spec()
        if stored is None or stored.dimension == self.spec.dimension:
            return
        as_float32 = dataclasses.replace(stored, vector_type="float32", vector_ranges=None)
        self.spec.check_compatible(as_float32, f"{self.store.name} at {self.store.location}")

    def _open_collection(self) -> None:
        """Create or check the collection; the sparse leg takes the settings it recorded."""
        spec = self.spec
        if self.sparse is not None:
            stored = self.store.read_spec()
            recorded = stored.model_options.get(self.sparse.options_key) if stored is not None else None
            self.sparse.adopt(recorded if isinstance(recorded, dict) else None, [])
            spec = self._with_sparse_settings(spec)
        self.collection_spec = self.store.ensure_collection(spec)
        self.report.collection = {
            "name": self.collection_spec.name,
            "dimension": self.collection_spec.dimension,
        }
        if self.collection_spec.sparse is not None:
            self.report.collection["sparse"] = self.collection_spec.sparse

    def _with_sparse_settings(self, spec: CollectionSpec) -> CollectionSpec:
        assert self.sparse is not None
        options = {**spec.model_options, self.sparse.options_key: self.sparse.settings()}
        return dataclasses.replace(spec, model_options=options)

    def fix_sparse(self, first_batch: Sequence[str]) -> None:
        """Where the collection recorded no BM25 length yet (new, or made elsewhere), fix it from the
        run's first batch of chunk texts and record it; a no-op once fixed."""
        if self.sparse is None or not self.sparse.pending or not first_batch:
            return
        self.sparse.adopt(None, first_batch)
        self.collection_spec = self._with_sparse_settings(self.collection_spec)
        self.store.update_spec(self.collection_spec)

    # -- documents and their chunks -------------------------------------------------------------------
    def admit(self, doc: Document | FileDocument | VisualDocument) -> bool:
        """Whether ``doc`` is to be chunked: every store can hold its fields (else it alone is left
        out, :mod:`~poolrag.ingest.record_rules`), its source is new to this run (else the run
        stops) and the checkpoint has not done it."""
        reason = string_problem(doc.source, "'source'")
        if reason is None:  # a second document with the same source stops the run; a left-out
            self.stored_ids.see(doc.source)  # one's stored chunks are its source's, kept by prune
            reason = metadata_problem(doc.metadata)
        if reason is None and isinstance(doc, Document):  # a file's text was decoded when listed
            reason = string_problem(doc.text, "'text'")
        if reason is not None:  # this document only (its stored chunks stay); the ones after it go in
            self._leave_out(printable(str(doc.source)), reason)
            return False
        self.report.documents += 1
        digest = document_version(doc)
        if (stored := self._done_before(doc.source, digest)) is not None:
            self.report.documents_skipped += 1
            self.report.chunks += len(stored)  # its chunks are the run's, stored already: the report's
            self.report.chunks_existing += len(stored)  # chunks are the collection's, as a clean run's
            self.documents_done += 1
            return False
        path = getattr(doc, "path", None)  # a file's (a record's source is its name)
        self._read_files = self._read_files or path is not None
        self._pending[doc.source] = _Pending(digest, shown=printable(str(path)) if path is not None else "")
        return True

    def _done_before(self, source: str, version: str) -> ChunkSet | None:
        """The stored chunks of ``source`` where the interrupted run did it, and the collection holds
        the very chunks it stored, not those a run chunking otherwise stored since (a document of no
        chunks is read again: nothing to embed); else ``None``. Only a document the checkpoint names
        costs a look at its stored ids."""
        if not self.checkpoint.names(source) or not self.stored_ids.holds(source):
            return None
        stored = self.stored_ids.chunks_of(source)
        return stored if self.checkpoint.is_done(source, _done_record(version, stored)) else None

    def chunk(self, source: str, chunk_id: str, payload: Mapping[str, Any] | None = None) -> bool:
        """Count one chunk of an admitted document; whether it is to be embedded and stored: new, or
        stored with another ``payload`` than this one (a record's fields or a page's title changed:
        written again under its id, its vector from the cache). ``None``: any payload will do."""
        self.report.chunks += 1
        state = self._pending[source]
        state.chunks.add(chunk_id)
        state.cut += 1
        if self.stored_ids.keep(chunk_id, payload):
            self.report.chunks_existing += 1
            return False
        state.left += 1
        return True

    def chunked(self, source: str) -> None:
        """Every chunk of ``source`` has been counted."""
        self._pending[source].chunked = True
        self._finish_if_done(source)

    def all_chunked(self) -> None:
        """Every admitted document has been chunked (for a driver told only of chunks, by workers
        that send no word about a document cut into none)."""
        for source in list(self._pending):
            self.chunked(source)

    def write(self, records: Sequence[ChunkRecord], sources: Sequence[str]) -> None:
        """Upsert ``records`` (the chunks of ``sources``, one entry a record) and account for them."""
        if records:
            self.store.upsert(list(records))
        self.stored(sources)

    def abandon(self, source: str, reason: str) -> None:
        """Leave out an admitted document whose file failed while it was read or embedded (once:
        a second failure of it says nothing): its stored chunks stay (prune keeps them, as a
        skipped file's), it is not checkpointed, so a re-run reads it again, and the rest of the
        run goes on. It is not counted among the run's documents: it is among those left out,
        named as the reader names a file it leaves out (under the path given)."""
        if (state := self._pending.pop(source, None)) is None:
            return
        self.report.documents -= 1
        self._leave_out(state.shown or printable(source), reason)

    def _leave_out(self, shown: str, reason: str) -> None:
        """Name a document left out in the log and the report (``shown``: how it is named)."""
        logger.warning("skipping %s: %s", shown, reason)
        self._left_out.append(f"{shown}: {reason}")
        self.documents_done += 1

    def stored(self, sources: Sequence[str]) -> None:
        """The store acknowledged one new chunk per entry of ``sources`` (written here or by a worker)."""
        self.report.upserted += len(sources)
        written = [source for source in sources if source in self._pending]  # not an abandoned one's
        for source in written:
            self._pending[source].left -= 1
        for source in dict.fromkeys(written):
            self._finish_if_done(source)

    def _finish_if_done(self, source: str) -> None:
        state = self._pending[source]
        if state.chunked and state.left == 0:
            self._delete(self.stored_ids.stale(source))
            self._finished[source] = _done_record(state.digest, state.chunks)
            del self._pending[source]
            self.documents_done += 1
            if state.cut == 0:  # an empty file: read (its old chunks go), but not a document ingested
                self.report.documents -= 1
                self.report.documents_without_text += 1

    def save(self) -> None:
        """Checkpoint the documents finished since the last save."""
        if self._finished:
            self.checkpoint.mark_done(self._finished)
            self._finished = {}

    # -- the end of a run -----------------------------------------------------------------------------
    def finish(
        self,
        *,
        prune: bool = False,
        skipped: Sequence[SkippedFile] = (),
        record_files: Sequence[str] = (),
        read_files: bool = False,
        excluded: Callable[[str], bool] | None = None,
    ) -> IngestReport:
        """After every batch is stored: prune, let the store optimise, drop the checkpoint.

        ``skipped``: files the reader left out; their chunks survive ``prune``, since an unreadable
        file is not a deleted one. ``record_files``: JSONL / CSV files read to their end (resolved
        paths); a record no longer in one is deleted as an edited document's old chunks are (a CSV
        row without an id is named by its line, so deleting a row renames the rows below it).
        ``read_files``: the documents came from :func:`~poolrag.ingest.read_paths` (even if none
        was left to read), so stored sources gone from disk are files deleted since, told of; a
        run of the caller's own documents only (``/kb/notes-1`` is a name, not a file) tells of none.
        ``excluded``: whether a stored file is one the run's ``exclude`` patterns left out
        (:class:`~poolrag.ingest.readers.ExcludedFiles`), told of as a file gone from disk is.
        A run that fails here (its checkpoint kept) lets the next one in, in this process too.
        """
        try:
            return self._finish(prune, skipped, record_files, read_files, excluded or _nothing_excluded)
        except BaseException:
            self.close()
            raise

    def _finish(
        self,
        prune: bool,
        skipped: Sequence[SkippedFile],
        record_files: Sequence[str],
        read_files: bool,
        excluded: Callable[[str], bool],
    ) -> IngestReport:
        self.save()
        report = self.report
        report.skipped = [str(s) for s in skipped] + self._left_out
        if prune and report.documents + report.documents_without_text == 0:  # finish() closes
            raise InvalidInputError(
                f"no document was read, so --prune would delete every chunk of {self.store.collection}: "
                "nothing was deleted (an unmounted or emptied folder?); to empty the collection, drop it"
            )
        kept = [Path(os.path.realpath(s.path)).as_posix() for s in skipped]  # a looping symlink too
        whole = tuple(f"{path}#" for path in record_files if path not in kept)
        if whole and not prune:  # prune deletes them with every other source not read
            for removed in self.stored_ids.orphans(lambda source: not source.startswith(whole)):
                self._delete(removed)
        if not prune and (read_files or self._read_files or record_files):
            self._tell_files_not_read(
                lambda source: _under(source, kept) or source.startswith(whole), excluded
            )
        if prune:
            for path in sorted({printable(s.path) for s in skipped if s.line is not None}):
                logger.warning(
                    "%s: records deleted from it are not pruned while one of its records cannot be read",
                    path,
                )
            for orphans in self.stored_ids.orphans(lambda source: _under(source, kept)):
                self._delete(orphans)
        self.store.optimize()
        self.checkpoint.remove()  # before the lock goes: the next run never opens a finished run's file
        self.close()
        report.seconds = time.monotonic() - self._started
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

    def _tell_files_not_read(self, kept: Callable[[str], bool], excluded: Callable[[str], bool]) -> None:
        """Count, and warn of, the files stored before that this run did not read because they are
        gone from disk, or because its ``exclude`` patterns left them out: their chunks are still
        found by search, and a run that says nothing of them ("up to date") lets a user believe a
        deleted, renamed or excluded file is gone from the collection."""
        gone: list[str] = []
        left_out: list[str] = []
        chunks = {"gone": 0, "excluded": 0}
        for source, count in self.stored_ids.unseen_sources():
            if kept(source) or (path := _file_of(source)) is None:
                continue
            if not os.path.lexists(path):
                files, kind = gone, "gone"
            elif excluded(path):
                files, kind = left_out, "excluded"
            else:
                continue  # a file under a path this run was not given: another run's to read
            chunks[kind] += count
            if not files or files[-1] != path:  # a file's records come one after another
                files.append(path)
        if gone:
            self.report.files_gone, self.report.chunks_of_files_gone = len(gone), chunks["gone"]
            _warn_not_read(gone, "gone from disk", chunks["gone"])
        if left_out:
            self.report.files_excluded = len(left_out)
            self.report.chunks_of_files_excluded = chunks["excluded"]
            _warn_not_read(left_out, "excluded by this run's --exclude", chunks["excluded"])

    def stored_chunk_ids(self) -> dict[str, str | None]:
        """The ids stored before the run and their payloads' digests (``None``: unknown), in memory,
        for workers in other processes that skip them (:func:`stored_as_is`)."""
        return dict(self.stored_ids.digests())

    def close(self) -> None:
        """Drop the run's scratch list of stored ids and let the next run in (also when this one
        failed: its checkpoint stays for that run to resume); idempotent."""
        stored_ids = getattr(self, "stored_ids", None)
        if stored_ids is not None:
            stored_ids.close()
            self.stored_ids = None  # type: ignore[assignment]
        run_lock = getattr(self, "_run_lock", None)
        if run_lock is not None:
            run_lock.release()

    def _delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if ids:
            self.store.delete(ids)
            self.report.deleted += len(ids)


def document_version(doc: Document | FileDocument | VisualDocument) -> str:
    """What the checkpoint records of a done document: its text's (or file's) digest and its
    fields', so a resumed run redoes a document whose text or fields changed since."""
    return f"{doc.digest}:{payload_digest(doc.metadata)}" if doc.metadata else doc.digest


def _done_record(version: str, chunks: ChunkSet) -> str:
    """What the checkpoint records of a done document: its version and the chunk ids it was stored
    as, so a resumed run skips it only while the collection holds exactly those."""
    return f"{version} {chunks.digest}"


def stored_as_is(stored: Mapping[str, str | None], chunk_id: str, payload: Mapping[str, Any]) -> bool:
    """Whether a chunk is among ``stored`` (:meth:`IngestDriver.stored_chunk_ids`) with this
    payload, so a worker need not embed it: the rule of :meth:`IngestDriver.chunk`."""
    return chunk_id in stored and payload_matches(stored[chunk_id], payload)


def _file_of(source: str) -> str | None:
    """The file a stored ``source`` was read from (itself, or for a JSONL or CSV record ``path#id``
    its file) where that is an absolute path; ``None`` for a source that names no file (a
    ``Document`` of the caller's own)."""
    path = source
    cut = source.find("#")
    while cut != -1:
        if source[:cut].lower().endswith(JSONL_SUFFIXES + CSV_SUFFIXES):
            path = source[:cut]
            break
        cut = source.find("#", cut + 1)
    return path if os.path.isabs(path) else None


def _nothing_excluded(path: str) -> bool:
    """No ``exclude`` patterns (documents not read from paths): no stored file is excluded."""
    return False


def _warn_not_read(files: Sequence[str], why: str, chunks: int) -> None:
    """One warning naming the stored ``files`` a run did not read (``why``), whose ``chunks`` stay."""
    shown = ", ".join(printable(path) for path in files[:3]) + (", ..." if len(files) > 3 else "")
    logger.warning(
        "%d %s stored by an earlier run %s %s (%s); %s %d %s still stored and found by "
        "search: run again with --prune to delete %s",
        len(files),
        "file" if len(files) == 1 else "files",
        "is" if len(files) == 1 else "are",
        why,
        shown,
        "its" if len(files) == 1 else "their",
        chunks,
        "chunk is" if chunks == 1 else "chunks are",
        "it" if chunks == 1 else "them",
    )


def _under(source: str, resolved: list[str]) -> bool:
    """Whether ``source`` is one of the ``resolved`` paths, a JSONL record of one (``path#id``) or a
    file inside one (a folder that could not be listed)."""
    return any(source == p or source.startswith((f"{p}#", f"{p}/")) for p in resolved)
