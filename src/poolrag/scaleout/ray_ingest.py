"""Ingestion on a Ray cluster: the single-machine pipeline's results, with embedding spread over actors.

The run around the embedding (collection, which documents and chunks are new, stale chunks, prune,
checkpoint, report) is :class:`~poolrag.ingest.driver.IngestDriver`'s, the same driver the
single-process :class:`~poolrag.ingest.IngestPipeline` uses; this module only moves the embedding
(and the writes, where a server allows them) to actors.

Where each step runs, and why:
  * **model parts** (one task with no resources reserved, on a CPU): loads the model once to tell
    the driver its facts (collection spec, checkpoint key) and hands back its chunker and, for
    ``--hybrid``, its BM25 encoder (both need only the tokenizer): the driver fixes BM25's settings
    with them, the collection's recorded ones or the mean length of the first batch of chunks,
    exactly as a single-process run fixes them.
  * **list** (driver): the readers list files and JSONL records as small rows (a file's path, a
    record's text); the driver admits them (unique sources, valid text, not done by the checkpoint).
    Files are read where they are chunked, so with several machines the paths must be on storage
    every node sees.
  * **chunk + embed** (an actor pool, ``map_batches``): each actor owns one :class:`~poolrag.Engine`
    (one GPU each when the cluster has GPUs, a share of the CPU cores when not) and the model's own
    tokenizer, so chunks are cut by the tokens the model reads and get the same content-addressed
    ids (:func:`~poolrag.ingest.chunk_id`) as on one machine. Chunks already stored are not
    embedded; the others are embedded in groups that fit the engine's token budget, with their BM25
    vectors when the collection is hybrid.
  * **embedding cache**: actors only *look up* vectors in the SQLite cache (when its file is visible
    to them; SQLite's LRU touch is their only write). Vectors they compute travel back with the
    batch and **the driver stores them**: one writer, no lock contention, no file to share.
  * **write**: a server store (a Milvus or Qdrant URL, see :class:`StoreAddress`) takes upserts
    from every actor at once, so the actors write their own chunks and only ids go back. Milvus
    Lite files and Qdrant local folders are single-process: the driver writes those, from the rows
    streamed back with ``iter_batches``. Either way the driver deletes (stale, pruned) and
    checkpoints a document only once all its chunks are stored.

Failures: an actor that dies is restarted and its batch is run again (Ray Data's actor fault
tolerance, on by default); since ids are content addresses, a batch written twice is written once.
Ray Data runs a dead actor's batch again for ever, so a document that kills every actor running it
(out of memory, a crash in native code) would reload the model in a loop: a batch started
:data:`MAX_BATCH_RUNS` times stops the job in one line naming its documents
(:class:`BatchKillsWorkersError`), the documents stored so far checkpointed. A file an actor cannot
read (deleted or rewritten since it was listed) is left out with a warning, as one process leaves it
out: its stored chunks stay and a re-run reads it again. A killed run resumes
from its checkpoint. The final collection equals the single-process run's:
same ids, same vectors, same payloads, same sparse vectors.
Not done on Ray: ColBERT token vectors and learned sparse vectors (``--sparse-model``, a model's
own sparse head); ingest those without ``--ray``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import ray

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.counts import check_count
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError, PoolragError
from poolrag.ingest.chunker import Chunk, TokenChunker
from poolrag.ingest.driver import IngestDriver, IngestReport, VectorSourceFacts, stored_as_is
from poolrag.ingest.encoders import DenseEncoder
from poolrag.ingest.readers import Document, FileDocument, PathDocuments, SkippedFile, changed_since_listed
from poolrag.ingest.shared_pass import has_sparse_head
from poolrag.ingest.sparse_encoders import (
    BM25ChunkEncoder,
    bm25_for_model,
    collection_languages,
    tokenizer_identity,
)
from poolrag.loaded_objects import freeze_loaded_objects
from poolrag.model_facts import ScoreKind
from poolrag.sparse.vector import SparseVector
from poolrag.sparse.words import DEFAULT_LANGUAGE, WORDS, WordAnalyzer
from poolrag.stores.address import StoreAddress
from poolrag.stores.base import ChunkRecord, Quantization, VectorStore

logger = logging.getLogger(__name__)

_PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class EngineRecipe:
    """How every actor builds the same engine and chunker (what a single-process run would use).

    Args:
        engine_args: the engine every actor builds (a model folder must exist on every node); a
            bare model path or hub id means its default options.
        dimensions: store Matryoshka-truncated vectors of this size (``None``: full size).
        chunk_tokens: tokens per chunk (``None``: :meth:`TokenChunker.for_model`'s default).
        overlap: tokens shared by neighbouring chunks (``None``: :meth:`TokenChunker.for_model`'s default).
    """

    engine_args: EngineArgs
    dimensions: int | None = None
    chunk_tokens: int | None = None
    overlap: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.engine_args, str):  # a bare model: its default options
            object.__setattr__(self, "engine_args", EngineArgs(self.engine_args))
        if not isinstance(self.engine_args, EngineArgs):
            raise InvalidInputError(f"engine_args must be EngineArgs, not {type(self.engine_args).__name__}")
        object.__setattr__(self, "engine_args", self.engine_args.for_other_processes())

    @property
    def model(self) -> str:
        return self.engine_args.model

    def build(self) -> tuple[Any, TokenChunker, DenseEncoder, CachedEmbedder]:
        """Engine, chunker and encoder, built where this is called (an actor, or the model-parts task)."""
        from poolrag.engine import Engine

        engine = Engine.from_engine_args(self.engine_args)
        if engine.facts.score_kind is ScoreKind.MAXSIM:
            raise InvalidInputError(
                f"{engine.facts.model_name} is a ColBERT model: ingest its token vectors without --ray"
            )
        chunker = TokenChunker.for_model(
            engine.tokenizer, engine.facts, self.chunk_tokens, self.overlap, prompt=engine.document_prompt
        )
        embedder = CachedEmbedder(engine, None, batch_size=1 << 30)
        return engine, chunker, DenseEncoder(embedder, self.dimensions), embedder


@dataclass(frozen=True)
class BM25Recipe:
    """The hybrid collection's lexical leg, as every actor builds it (``--hybrid`` on Ray).

    Args:
        analyzer: ``words`` or ``wordpiece`` (:data:`poolrag.sparse.words.ANALYZERS`).
        language: the declared ``--language`` (the stemmer and stop words of ``words``, and the
            collection's recorded language); ``None``: english stems, the language detected as a
            single-process run detects it.
    """

    analyzer: str
    language: str | None = None

    def build(self, engine: Any, settings: Mapping[str, Any] | None = None) -> BM25ChunkEncoder:
        """The BM25 encoder over ``engine``'s model; ``settings``: the ones the driver fixed."""
        if has_sparse_head(engine):
            raise InvalidInputError(
                f"{engine.facts.model_name} has its own sparse head, which --hybrid uses; --ray makes BM25 "
                "vectors only: ingest it without --ray"
            )
        analyzer = WordAnalyzer(self.language or DEFAULT_LANGUAGE) if self.analyzer == WORDS else None
        languages = collection_languages(engine.spec.path, self.language)
        encoder = bm25_for_model(engine.tokenizer, tokenizer_identity(engine), None, analyzer, languages)
        if settings is not None:
            encoder.adopt(dict(settings), [])
        return encoder


@dataclass(frozen=True)
class RayIngestOptions:
    """How the job is spread over the cluster.

    Args:
        workers: embedding actors (each loads the model once); never more than the run has
            batches of ``documents_per_batch`` documents, since an actor left without one would load
            the model for nothing.
        gpus_per_worker: ``None``: 1 when the cluster has GPUs, else 0.
        cpus_per_worker: ``None``: 1 next to a GPU, else the cluster's CPUs shared by the workers.
        documents_per_batch: documents handed to an actor per call (its chunks are then grouped
            by the engine's token budget).
        write_batch: chunks per upsert on the driver (and per checkpoint save); for a hybrid
            collection also the first batch BM25's mean length is taken from, as ``batch_size``
            is on one machine.
        max_restarts, max_task_retries: deprecated and ignored: Ray Data restarts a dead actor and
            runs its batch again by itself (passing them through is deprecated in Ray), and a
            batch started :data:`MAX_BATCH_RUNS` times stops the job.
    """

    workers: int = 1
    gpus_per_worker: float | None = None
    cpus_per_worker: float | None = None
    documents_per_batch: int = 8
    write_batch: int = 256
    max_restarts: int | None = None
    max_task_retries: int | None = None

    def __post_init__(self) -> None:
        if self.max_restarts is not None or self.max_task_retries is not None:
            warnings.warn(
                "RayIngestOptions(max_restarts=..., max_task_retries=...) is deprecated and ignored: "
                "Ray Data restarts dead actors and retries their batches itself",
                DeprecationWarning,
                stacklevel=3,
            )

    def resources(self, workers: int | None = None) -> tuple[float, float]:
        """``(cpus, gpus)`` of one actor on the connected cluster, when ``workers`` actors (default:
        :attr:`workers`) share it."""
        check_count(self.workers, "workers")
        workers = self.workers if workers is None else workers
        cluster = ray.cluster_resources()
        gpus = self.gpus_per_worker
        if gpus is None:
            gpus = 1.0 if cluster.get("GPU", 0) >= 1 else 0.0
        cpus = self.cpus_per_worker
        if cpus is None:
            cpus = 1.0 if gpus else max(float(cluster.get("CPU", 1)) / workers, 0.1)
        return cpus, gpus

    def actors_for(self, documents: int) -> int:
        """The actors to start for ``documents`` documents: :attr:`workers`, but no more than their
        batches (each actor loads the model; one with no batch to run would only cost its load)."""
        check_count(self.workers, "workers")
        return min(self.workers, max(1, math.ceil(documents / self.documents_per_batch)))


class _CacheLookup:
    """The embedding cache as an actor sees it: look-ups from the shared file (when this node sees
    it), computed vectors kept aside for the driver to store."""

    def __init__(self, path: str | None) -> None:
        self.cache = EmbeddingCache(path) if path is not None and Path(path).exists() else None
        if path is not None and self.cache is None:
            logger.info("embedding cache %s is not visible on this node; every vector is computed", path)
        self.computed: dict[bytes, np.ndarray] = {}

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        return self.cache.get_many(keys) if self.cache is not None else {}

    def put_many(self, items: Mapping[bytes, np.ndarray]) -> None:
        self.computed.update(items)

    def take(self) -> dict[bytes, np.ndarray]:
        taken, self.computed = self.computed, {}
        return taken


#: Starts of one batch after which its documents are taken to kill the actors running them.
MAX_BATCH_RUNS = 3


class BatchKillsWorkersError(PoolragError, RuntimeError):
    """A batch of documents was started :data:`MAX_BATCH_RUNS` times: each run's actor died."""


@ray.remote(num_cpus=0)
class BatchRuns:
    """How often each batch (its documents' sources) was started, kept outside the actors: their
    counts die with them, and the error an actor raises reaches the driver as text only."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, ...], int] = {}

    def start(self, sources: list[str]) -> int:
        key = tuple(sorted(sources))
        self.runs[key] = self.runs.get(key, 0) + 1
        return self.runs[key]

    def refused(self) -> list[list[str]]:
        """The batches started more than :data:`MAX_BATCH_RUNS` times."""
        return [list(key) for key, runs in self.runs.items() if runs > MAX_BATCH_RUNS]


def _killed_by(sources: list[str]) -> BatchKillsWorkersError:
    shown = ", ".join(sources[:5]) + (f" and {len(sources) - 5} more" if len(sources) > 5 else "")
    return BatchKillsWorkersError(
        f"the Ray worker embedding {shown} died {MAX_BATCH_RUNS} times (out of memory, or a crash in "
        "native code: see the worker's log above); ingest those documents without --ray to see "
        "which, or leave them out; the documents stored so far are kept"
    )


class ChunkEmbedder:
    """The actor: documents in, one row per chunk out (id, source, how many chunks its document has,
    payload, vector, sparse vector, and the cache entries it computed). Chunks whose id is already
    stored come back without a vector. Given a server store's address, the actor upserts its new
    chunks itself and sends back ``written`` rows without vectors. A file that cannot be read any
    more comes back as one row saying why (``unread``), for the driver to leave it out."""

    def __init__(
        self,
        recipe: EngineRecipe,
        cache_path: str | None,
        existing_ids: Any,
        cpu_threads: int,
        bm25: BM25Recipe | None = None,
        bm25_settings: Mapping[str, Any] | None = None,
        store_address: StoreAddress | None = None,
        batch_runs: Any = None,
    ) -> None:
        import torch

        self.existing: Mapping[str, str | None] = (
            ray.get(existing_ids) if isinstance(existing_ids, ray.ObjectRef) else existing_ids
        )
        if not ray.get_gpu_ids():
            torch.set_num_threads(max(cpu_threads, 1))  # this actor's share, not every core
        self.engine, self.chunker, self.encoder, embedder = recipe.build()
        self.sparse = bm25.build(self.engine, bm25_settings) if bm25 is not None else None
        self.store = store_address.open() if store_address is not None else None
        self.lookup = _CacheLookup(cache_path)
        self.record_computed = cache_path is not None  # else only the keys go back (for the count)
        embedder.cache = cast(EmbeddingCache, self.lookup)
        self.token_budget = self.engine.max_batch_tokens
        self.special_tokens = int(self.engine.tokenizer.num_special_tokens_to_add(pair=False))
        self.full_dimension = int(self.engine.facts.embedding_dim or 0)
        self.batch_runs = batch_runs  # a BatchRuns actor's handle, or None: no count kept
        freeze_loaded_objects()  # an actor lives for the job: full collections need not walk its model

    def _count_run(self, sources: list[str]) -> None:
        """Count this start of the batch; past :data:`MAX_BATCH_RUNS`, refuse it (an exception in
        the actor fails the job: Ray retries dead actors, not raised errors)."""
        if self.batch_runs is not None and ray.get(self.batch_runs.start.remote(sources)) > MAX_BATCH_RUNS:
            raise _killed_by(sources)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        documents = list(_documents(batch))
        self._count_run([doc.source for doc in documents])
        per_doc: list[list[Chunk]] = []
        unread: dict[str, str] = {}  # source -> why its file could not be read
        for doc in documents:
            try:
                per_doc.append(list(self.chunker.iter_chunks(doc)))
            except (OSError, UnicodeDecodeError) as exc:
                if not isinstance(doc, FileDocument):
                    raise
                unread[doc.source] = changed_since_listed(exc)
        chunks = [chunk for doc_chunks in per_doc for chunk in doc_chunks]
        fresh = [i for i, c in enumerate(chunks) if not stored_as_is(self.existing, c.id, c.payload())]
        vectors = np.zeros((len(chunks), self.encoder.dimension), dtype=np.float32)
        for group in self._token_groups([chunks[i] for i in fresh], fresh):
            # the chunker's token ids go along, so the actor does not tokenise each chunk again
            part = [chunks[i] for i in group]
            encoded = self.encoder.encode([c.text for c in part], [c.token_ids for c in part])
            vectors[group] = np.stack(encoded)  # a group is never empty: one vector a chunk
        sparse: list[SparseVector | None] = [None] * len(chunks)
        if self.sparse is not None and fresh:
            for row, vector in zip(fresh, self.sparse.encode([chunks[i].text for i in fresh]), strict=True):
                sparse[row] = vector
        if self.store is not None and fresh:
            self.store.upsert(
                [ChunkRecord(chunks[i].id, vectors[i], chunks[i].payload(), sparse=sparse[i]) for i in fresh]
            )
            vectors = np.zeros((len(chunks), 1), dtype=np.float32)  # stored: nothing to send back
        computed = list(self.lookup.take().items())
        keys = np.array([b""] * len(chunks), dtype=object)
        width = self.full_dimension if self.record_computed else 1
        full = np.zeros((len(chunks), width), dtype=np.float32)
        for row, (key, vector) in enumerate(computed):  # entries ride on the first rows
            keys[row] = key
            if self.record_computed:
                full[row] = vector
        rows = {
            "id": np.array([c.id for c in chunks], dtype=object),
            "source": np.array([c.source for c in chunks], dtype=object),
            "doc_chunks": np.array([len(d) for d in per_doc for _ in d], dtype=np.int64),
            "payload": np.array([json.dumps(c.payload()) for c in chunks], dtype=object),
            "vector": vectors,
            "sparse": np.array([_sparse_json(v) for v in sparse], dtype=object),
            "written": np.full(len(chunks), self.store is not None, dtype=bool),
            "cache_key": keys,
            "cache_vector": full,
            "unread": np.array([""] * len(chunks), dtype=object),
        }
        return _with_unread_rows(rows, unread)

    def _token_groups(self, chunks: list[Chunk], rows: list[int]) -> Iterable[list[int]]:
        """Rows in groups whose tokens (with the model's special tokens) fit one forward pass."""
        group: list[int] = []
        tokens = 0
        for chunk, row in zip(chunks, rows, strict=True):
            size = chunk.num_tokens + self.special_tokens
            if group and tokens + size > self.token_budget:
                yield group
                group, tokens = [], 0
            group.append(row)
            tokens += size
        if group:
            yield group


def _with_unread_rows(rows: dict[str, np.ndarray], unread: Mapping[str, str]) -> dict[str, np.ndarray]:
    """``rows`` and one more per file that could not be read: its source and why (``unread``), the
    other columns empty (no chunk)."""
    if not unread:
        return rows
    count = len(unread)
    extra: dict[str, np.ndarray] = {}
    for key, column in rows.items():
        blank = np.zeros((count, *column.shape[1:]), dtype=column.dtype)
        if column.dtype == object:
            blank[:] = b"" if key == "cache_key" else ""
        extra[key] = blank
    extra["source"] = np.array(list(unread), dtype=object)
    extra["unread"] = np.array(list(unread.values()), dtype=object)
    return {key: np.concatenate([rows[key], extra[key]]) for key in rows}


def _sparse_json(vector: SparseVector | None) -> str:
    """A sparse vector as a row value (float32 weights survive the JSON round trip exactly)."""
    if vector is None:
        return ""
    return json.dumps({"indices": vector.indices.tolist(), "values": vector.values.tolist()})


def _sparse_from_json(text: str) -> SparseVector | None:
    if not text:
        return None
    data = json.loads(text)
    return SparseVector(
        np.asarray(data["indices"], dtype=np.int32), np.asarray(data["values"], dtype=np.float32)
    )


def _document_row(doc: Document | FileDocument) -> dict[str, str]:
    """The row an actor reads a document from: a file's path, a record's (or a PDF's) text."""
    is_file = isinstance(doc, FileDocument)
    return {
        "source": doc.source,
        "path": os.path.abspath(doc.path) if is_file else "",  # actors run in their raylet's directory
        "digest": doc.digest if is_file else "",
        "text": "" if is_file else doc.text,
        "metadata": json.dumps(doc.metadata),
        "page_starts": "" if is_file else ",".join(map(str, doc.page_starts)),
    }


def _documents(batch: dict[str, np.ndarray]) -> Iterable[Document | FileDocument]:
    for source, path, digest, text, metadata, pages in zip(*(batch[key] for key in _ROW_KEYS), strict=True):
        meta = json.loads(str(metadata))
        if path:
            yield FileDocument(str(source), Path(str(path)), str(digest), meta)
        else:
            starts = tuple(int(start) for start in str(pages).split(",") if start)
            yield Document(str(source), str(text), meta, starts)


@ray.remote(num_cpus=0)
def _model_parts(
    recipe: EngineRecipe, bm25: BM25Recipe | None
) -> tuple[VectorSourceFacts, TokenChunker, BM25ChunkEncoder | None]:
    """Load the model once beside the job, on a CPU and reserving nothing (it never waits for the
    actors' GPUs; the facts do not depend on the device), so a refusal (ColBERT, ``dimensions``, a
    sparse head) comes back before the store is touched. Returns the model's facts and the parts
    that need only its tokenizer: the chunker and the BM25 encoder, with which the driver fixes BM25's
    settings from the first batch as a single-process run does. Nothing is tuned or compiled here:
    this engine never embeds, and timing paths would take CPU from the actors that do."""
    args = recipe.engine_args.replace(device="cpu", tune="off", compile="off")
    cpu = dataclasses.replace(recipe, engine_args=args)
    engine, chunker, encoder, _ = cpu.build()
    sparse = bm25.build(engine) if bm25 is not None else None
    facts = {field.name: getattr(encoder, field.name) for field in dataclasses.fields(VectorSourceFacts)}
    return VectorSourceFacts(**facts), chunker, sparse


def _first_batch(
    chunker: TokenChunker, rows: list[dict[str, str]], existing: Mapping[str, str | None], size: int
) -> list[str]:
    """The texts of the first ``size`` new chunks of ``rows``: the batch a single-process run fixes
    BM25's mean length from."""
    texts: list[str] = []
    for doc in _documents({key: np.array([row[key] for row in rows], dtype=object) for key in _ROW_KEYS}):
        before = len(texts)
        try:
            for chunk in chunker.iter_chunks(doc):
                if not stored_as_is(existing, chunk.id, chunk.payload()):
                    texts.append(chunk.text)
                    if len(texts) >= size:
                        return texts
        except (OSError, UnicodeDecodeError):
            if not isinstance(doc, FileDocument):
                raise
            del texts[before:]  # a file no longer readable is left out (its actor says why)
    return texts


_ROW_KEYS = ("source", "path", "digest", "text", "metadata", "page_starts")
#: The columns of the actors' rows the driver reads for each chunk (the cache's go apart).
_READ_BACK = ("id", "source", "doc_chunks", "payload", "vector", "sparse", "written", "unread")


def _get(ref: Any) -> Any:
    """``ray.get``, with a poolrag error raised in a task re-raised as itself (one line, not Ray's
    traceback)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, PoolragError):
            raise exc.cause from None
        raise


def ingest_on_ray(
    documents: Iterable[Document | FileDocument],
    store: VectorStore,
    recipe: EngineRecipe,
    *,
    cache: EmbeddingCache | None = None,
    options: RayIngestOptions | None = None,
    quantization: Quantization | None = None,
    model_options: Mapping[str, object] | None = None,
    prune: bool = False,
    skipped: Sequence[SkippedFile] = (),
    record_files: Sequence[str] | None = None,
    bm25: BM25Recipe | None = None,
    checkpoint_path: str | Path | None = None,
    checkpoint_dir: str | Path | None = None,
    store_address: StoreAddress | None = None,
    embedder_class: type[ChunkEmbedder] = ChunkEmbedder,
) -> IngestReport:
    """Fill ``store`` from ``documents`` on the connected Ray cluster (``ray.init`` first).

    Same collection and report as :class:`~poolrag.ingest.IngestPipeline` would give: re-runs add
    nothing, changed documents replace their old chunks, ``prune`` drops sources not given, a killed
    run resumes from its checkpoint (``checkpoint_path``, else one under ``checkpoint_dir`` or the
    cache folder). ``skipped``: files the reader left out (their chunks survive ``prune``); none
    given, the ones :func:`~poolrag.ingest.read_paths` carries (``documents.skipped``), as
    :meth:`~poolrag.ingest.IngestPipeline.run` takes them. ``record_files``: the JSONL and CSV files
    read to their end, whose records no longer in them lose their chunks; ``None``, the ones
    ``read_paths`` carries (``documents.record_files``), so a list of its documents passes them here.
    ``bm25``: also write BM25 sparse vectors (a hybrid collection). ``store_address``: how actors
    open ``store`` themselves; when it names a server they write to it directly
    (:func:`actors_write`). ``embedder_class``: the actor class (a subclass can add behaviour,
    e.g. the tests' actor that dies once).
    """
    options = options or RayIngestOptions()
    skipped = skipped or getattr(documents, "skipped", ())
    if record_files is None:
        record_files = getattr(documents, "record_files", ())
    _ray_data_console_at_ray_level()
    options.resources()  # a bad worker count, or no cluster joined, refused before the model loads
    source, chunker, sparse = _get(_model_parts.remote(recipe, bm25))
    driver = IngestDriver(
        store,
        source,
        (chunker.max_tokens, chunker.overlap),
        quantization=quantization,
        model_options=dict(model_options or {}),
        checkpoint_path=checkpoint_path,
        checkpoint_dir=checkpoint_dir,
        sparse=sparse,
    )
    driver.start()
    try:
        rows = [_document_row(doc) for doc in documents if driver.admit(doc)]
        stored_ids = driver.stored_chunk_ids()
        existing = ray.put(stored_ids)
        if sparse is not None and sparse.pending and rows:
            driver.fix_sparse(_first_batch(chunker, rows, stored_ids, options.write_batch))
        workers = options.actors_for(len(rows))
        cpus, gpus = options.resources(workers)
        by_actors = actors_write(store_address, driver.spec.sparse)
        writers = "the actors write" if by_actors else "the driver writes"
        logger.info(
            "ray ingest: %d documents to chunk, %d chunks already stored; %d workers x (%.2g CPU, %.2g GPU); "
            "%s to %s",
            len(rows),
            len(stored_ids),
            workers,
            cpus,
            gpus,
            writers,
            store.location,
        )
        if rows:
            batch_runs = BatchRuns.remote()  # type: ignore[attr-defined]
            try:
                dataset = _document_blocks(rows, options.documents_per_batch).map_batches(
                    embedder_class,
                    fn_constructor_kwargs={
                        "recipe": recipe,
                        "cache_path": None if cache is None else os.path.abspath(cache.path),
                        "existing_ids": existing,
                        "cpu_threads": max(int(cpus), 1),
                        "bm25": bm25,
                        "bm25_settings": sparse.settings() if sparse is not None else None,
                        "store_address": store_address if by_actors else None,
                        "batch_runs": batch_runs,
                    },
                    batch_size=options.documents_per_batch,
                    batch_format="numpy",
                    # one batch at a time each: a second one queued behind an actor's first waited
                    # there while an actor that finished loading later had nothing to do
                    compute=ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=1),
                    num_cpus=cpus,
                    num_gpus=gpus,
                )
                _write(dataset, driver, cache, options.write_batch)
            except BaseException:
                driver.save()
                driver.close()
                refused = _refused_batches(batch_runs)
                if refused:  # one line, not Ray's traceback of the actor's
                    raise _killed_by(refused[0]) from None
                raise
            finally:
                _stop_quietly(batch_runs)
            driver.save()
        driver.all_chunked()  # the documents cut into no chunk at all sent no row
        # a record no longer in a JSONL / CSV file read to its end goes, as in a single-process run
        return driver.finish(
            prune=prune,
            skipped=skipped,
            record_files=record_files,
            read_files=isinstance(documents, PathDocuments),
            excluded=getattr(documents, "excluded", None),
        )
    except BaseException:
        driver.close()  # idempotent: the run's lock and scratch file go whatever failed
        raise


def _document_blocks(rows: list[dict[str, str]], size: int) -> Any:
    """The rows as a dataset of blocks of ``size`` rows (the last one fewer), one task each:
    ``map_batches`` bundles blocks smaller than its batch size into one task, and the even split of
    ``from_items`` (13 documents in blocks of 7 and 6, for batches of 8) sent them all to one actor
    while the others, their model loaded, waited."""
    import pyarrow as pa

    blocks = [pa.Table.from_pylist(rows[at : at + size]) for at in range(0, len(rows), size)]
    return ray.data.from_arrow(blocks)


def _refused_batches(batch_runs: Any) -> list[list[str]]:
    """The batches ``batch_runs`` refused; none when it cannot say (the cluster gone: the error that
    stopped the job is then the one to show, not this question's)."""
    try:
        return cast(list[list[str]], ray.get(batch_runs.refused.remote(), timeout=10))
    except Exception:
        logger.debug("the batch counter did not answer", exc_info=True)
        return []


def _stop_quietly(actor: Any) -> None:
    try:
        ray.kill(actor)
    except Exception:  # already gone with its node or cluster
        logger.debug("stopping the batch counter failed", exc_info=True)


def _ray_data_console_at_ray_level() -> None:
    """Ray Data prints its plan and a progress report every 10 s at INFO through a handler of its
    own (its logger does not propagate to Ray's); that console says what Ray's logger is set to
    say (:func:`poolrag.scaleout.cluster.connect`), never more. Ray Data's log file keeps it all."""
    level = max(logging.INFO, logging.getLogger("ray").getEffectiveLevel())
    for handler in logging.getLogger("ray.data").handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(level)


def actors_write(address: StoreAddress | None, sparse: str | None = None) -> bool:
    """Whether the actors upsert their chunks themselves: only into a server store, which takes
    writes from many processes; a Milvus Lite file or a Qdrant local folder is opened by one process
    only, so the driver writes those (and any store whose address the actors were not given).
    ``sparse``: the collection's sparse field. Milvus keeps a BM25 collection's term statistics in
    the collection, updated read-modify-write on each upsert, so the driver is its one writer too
    (Qdrant weighs BM25 terms on the server)."""
    if address is None or not address.served:
        return False
    return not (address.kind == "milvus" and sparse == "bm25")


def _write(dataset: Any, driver: IngestDriver, cache: EmbeddingCache | None, batch_size: int) -> None:
    """Stream the actors' rows back: upsert the ones they did not write, account for every chunk,
    and store the vectors they computed in the cache (the driver is its one writer)."""
    report = driver.report
    counted: dict[str, int] = {}
    last_log = time.monotonic()
    for batch in dataset.iter_batches(batch_size=batch_size, batch_format="numpy"):
        records: list[ChunkRecord] = []
        sources: list[str] = []
        written: list[str] = []
        done: list[str] = []
        rows = zip(*(batch[key] for key in _READ_BACK), strict=True)
        for cid, source, doc_chunks, payload, vector, sparse, by_actor, unread in rows:
            source = str(source)
            if unread:  # its file could not be read: left out, its stored chunks kept
                driver.abandon(source, str(unread))
                continue
            if driver.chunk(source, str(cid), json.loads(payload)):
                if by_actor:
                    written.append(source)
                else:
                    vector = np.asarray(vector, dtype=np.float32)
                    sparse_vector = _sparse_from_json(sparse)
                    records.append(ChunkRecord(str(cid), vector, json.loads(payload), sparse_vector))
                    sources.append(source)
            counted[source] = counted.get(source, 0) + 1
            if counted[source] == int(doc_chunks):
                done.append(source)
        driver.write(records, sources)
        driver.stored(written)
        for source in done:
            driver.chunked(source)
        computed = {
            bytes(key): np.asarray(vec, dtype=np.float32)
            for key, vec in zip(batch["cache_key"], batch["cache_vector"], strict=True)
            if key
        }
        report.embedded += len(computed)  # texts the model ran on (cache misses)
        if driver.sparse is not None:
            report.sparse_computed += len(records) + len(written)  # the actors' BM25 keeps no cache
        if cache is not None and computed:
            cache.put_many(computed)
        driver.save()
        if time.monotonic() - last_log >= _PROGRESS_EVERY_S:
            last_log = time.monotonic()
            logger.info(
                "ray ingest: %d chunks so far (%d written, %d already stored)",
                report.chunks,
                report.upserted,
                report.chunks_existing,
            )
