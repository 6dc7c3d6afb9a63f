"""Ingestion on a Ray cluster: the single-machine pipeline's results, with embedding spread over actors.

Where each step runs, and why:
  * **list** (driver): the readers list files and JSONL records as small rows (a file's path, a
    record's text), checking that sources are unique. Files are read where they are chunked, so
    with several machines the paths must be on storage every node sees.
  * **chunk + embed** (an actor pool, ``map_batches``): each actor owns one :class:`~poolrag.Engine`
    (one GPU each when the cluster has GPUs, a share of the CPU cores when not) and the model's own
    tokenizer, so chunks are cut by the tokens the model reads and get the same content-addressed
    ids (:func:`~poolrag.ingest.chunk_id`) as on one machine. Chunks already stored are not
    embedded; the others are embedded in groups that fit the engine's token budget.
  * **embedding cache**: actors only *look up* vectors in the SQLite cache (when its file is visible
    to them; SQLite's LRU touch is their only write). Vectors they compute travel back with the
    batch and **the driver stores them**: one writer, no lock contention, no file to share.
  * **write** (driver): results stream back with ``iter_batches`` and are upserted by id. Milvus
    Lite files and Qdrant local folders are single-process, so the driver is the one writer for
    every store here (server stores could take writes from actors; that is not done yet).

Failures: an actor that dies is restarted and its batch is run again (``max_restarts`` /
``max_task_retries``); since ids are content addresses, a batch written twice is written once.
The final collection equals the single-process run's: same ids, same vectors, same payloads.
Not done on Ray: checkpoints (a re-run skips stored ids instead), ColBERT token vectors and hybrid
sparse vectors (BM25 fixes its length normalisation from the first batch, one process at a time).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import ray

from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.ingest.chunker import Chunk, TokenChunker
from poolrag.ingest.encoders import DenseEncoder
from poolrag.ingest.pipeline import IngestReport
from poolrag.ingest.readers import Document, FileDocument, SkippedFile
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.stores.base import ChunkRecord, CollectionSpec, Quantization, VectorStore

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
        overlap: tokens shared by neighbouring chunks.
    """

    engine_args: EngineArgs
    dimensions: int | None = None
    chunk_tokens: int | None = None
    overlap: int = 32

    def __post_init__(self) -> None:
        if isinstance(self.engine_args, str):  # a bare model: its default options
            object.__setattr__(self, "engine_args", EngineArgs(self.engine_args))
        if not isinstance(self.engine_args, EngineArgs):
            raise InvalidInputError(f"engine_args must be EngineArgs, not {type(self.engine_args).__name__}")

    @property
    def model(self) -> str:
        return self.engine_args.model

    def build(self) -> tuple[Any, TokenChunker, DenseEncoder, CachedEmbedder]:
        """Engine, chunker and encoder, built where this is called (an actor, or a probe task)."""
        from poolrag.engine import Engine

        engine = Engine.from_engine_args(self.engine_args)
        if engine.facts.score_kind is ScoreKind.MAXSIM:
            raise InvalidInputError(
                f"{engine.facts.model_name} is a ColBERT model: ingest its token vectors without --ray"
            )
        chunker = TokenChunker.for_model(engine.tokenizer, engine.facts, self.chunk_tokens, self.overlap)
        embedder = CachedEmbedder(engine, None, batch_size=1 << 30)
        return engine, chunker, DenseEncoder(embedder, self.dimensions), embedder


@dataclass(frozen=True)
class RayIngestOptions:
    """How the job is spread over the cluster.

    Args:
        workers: embedding actors (each loads the model once).
        gpus_per_worker: ``None``: 1 when the cluster has GPUs, else 0.
        cpus_per_worker: ``None``: 1 next to a GPU, else the cluster's CPUs shared by the workers.
        documents_per_batch: documents handed to an actor per call (its chunks are then grouped
            by the engine's token budget).
        write_batch: chunks per upsert on the driver.
        max_restarts: times a dead actor is started again.
        max_task_retries: times a batch whose actor died is run again.
    """

    workers: int = 1
    gpus_per_worker: float | None = None
    cpus_per_worker: float | None = None
    documents_per_batch: int = 8
    write_batch: int = 256
    max_restarts: int = 3
    max_task_retries: int = 3

    def resources(self) -> tuple[float, float]:
        """``(cpus, gpus)`` of one actor on the connected cluster."""
        if self.workers < 1:
            raise InvalidInputError("workers must be at least 1")
        cluster = ray.cluster_resources()
        gpus = self.gpus_per_worker
        if gpus is None:
            gpus = 1.0 if cluster.get("GPU", 0) >= 1 else 0.0
        cpus = self.cpus_per_worker
        if cpus is None:
            cpus = 1.0 if gpus else max(float(cluster.get("CPU", 1)) / self.workers, 0.1)
        return cpus, gpus


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


class ChunkEmbedder:
    """The actor: documents in, one row per chunk out (id, source, payload, vector, and the cache
    entries it computed). Chunks whose id is already stored come back flagged, without a vector."""

    def __init__(
        self,
        recipe: EngineRecipe,
        cache_path: str | None,
        existing_ids: Any,
        cpu_threads: int,
    ) -> None:
        import torch

        self.existing: frozenset[str] = (
            ray.get(existing_ids) if isinstance(existing_ids, ray.ObjectRef) else existing_ids
        )
        if not ray.get_gpu_ids():
            torch.set_num_threads(max(cpu_threads, 1))  # this actor's share, not every core
        self.engine, self.chunker, self.encoder, embedder = recipe.build()
        self.lookup = _CacheLookup(cache_path)
        self.record_computed = cache_path is not None  # else only the keys go back (for the count)
        embedder.cache = cast(EmbeddingCache, self.lookup)
        self.token_budget = self.engine.max_batch_tokens
        self.special_tokens = int(self.engine.tokenizer.num_special_tokens_to_add(pair=False))
        self.full_dimension = int(self.engine.facts.embedding_dim or 0)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        chunks = [chunk for doc in _documents(batch) for chunk in self.chunker.iter_chunks(doc)]
        fresh = [i for i, c in enumerate(chunks) if c.id not in self.existing]
        vectors = np.zeros((len(chunks), self.encoder.dimension), dtype=np.float32)
        for group in self._token_groups([chunks[i] for i in fresh], fresh):
            # the chunker's token ids go along, so the actor does not tokenise each chunk again
            part = [chunks[i] for i in group]
            encoded = self.encoder.encode([c.text for c in part], [c.token_ids for c in part])
            vectors[group] = np.stack(encoded) if encoded else vectors[group]
        computed = list(self.lookup.take().items())
        keys = np.array([b""] * len(chunks), dtype=object)
        width = self.full_dimension if self.record_computed else 1
        full = np.zeros((len(chunks), width), dtype=np.float32)
        for row, (key, vector) in enumerate(computed):  # entries ride on the first rows
            keys[row] = key
            if self.record_computed:
                full[row] = vector
        existing = np.ones(len(chunks), dtype=bool)
        existing[fresh] = False
        return {
            "id": np.array([c.id for c in chunks], dtype=object),
            "source": np.array([c.source for c in chunks], dtype=object),
            "payload": np.array([json.dumps(c.payload()) for c in chunks], dtype=object),
            "vector": vectors,
            "existing": existing,
            "cache_key": keys,
            "cache_vector": full,
        }

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


def _document_rows(
    documents: Iterable[Document | FileDocument],
) -> list[dict[str, str]]:
    """The rows the actors read documents from: a file's path, a record's text."""
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for doc in documents:
        if doc.source in seen:
            raise InvalidInputError(f"two documents share the source {doc.source!r}; sources must be unique")
        seen.add(doc.source)
        is_file = isinstance(doc, FileDocument)
        rows.append(
            {
                "source": doc.source,
                "path": str(doc.path) if is_file else "",
                "digest": doc.digest if is_file else "",
                "text": "" if is_file else doc.text,
                "metadata": json.dumps(doc.metadata),
            }
        )
    return rows


def _documents(batch: dict[str, np.ndarray]) -> Iterable[Document | FileDocument]:
    for source, path, digest, text, metadata in zip(
        batch["source"], batch["path"], batch["digest"], batch["text"], batch["metadata"], strict=True
    ):
        meta = json.loads(str(metadata))
        if path:
            yield FileDocument(str(source), Path(str(path)), str(digest), meta)
        else:
            yield Document(str(source), str(text), meta)


@ray.remote(num_cpus=0, max_calls=1)
def _probe_facts(recipe: EngineRecipe) -> dict[str, Any]:
    """The model's facts (identity, sizes) and the checks a single-process run makes before it
    touches the store (ColBERT, ``dimensions``). On a CPU and reserving nothing, so it never
    waits for the actors' GPUs; the facts do not depend on the device."""
    cpu = dataclasses.replace(recipe, engine_args=recipe.engine_args.replace(device="cpu"))
    engine, _, encoder, _ = cpu.build()
    facts = engine.facts
    return {"model_name": facts.model_name, "facts": facts.to_json(), "dimension": encoder.dimension}


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
    embedder_class: type[ChunkEmbedder] = ChunkEmbedder,
) -> IngestReport:
    """Fill ``store`` from ``documents`` on the connected Ray cluster (``ray.init`` first).

    Same collection as :class:`~poolrag.ingest.IngestPipeline` would write: re-runs add nothing,
    changed documents replace their old chunks, ``prune`` drops sources not given. ``skipped``:
    files the reader left out (their chunks survive ``prune``). ``embedder_class``: the actor
    class (a subclass can add behaviour, e.g. the tests' actor that dies once).
    """
    options = options or RayIngestOptions()
    started = time.monotonic()
    cpus, gpus = options.resources()
    report = IngestReport()
    # The probe loads the model while the actors start; the collection is made once it answers.
    # An existing collection is checked first, so a wrong model fails before anything is embedded.
    collection = _Collection(store, _probe_facts.remote(recipe), quantization, model_options, report)
    if store.read_spec() is not None:
        collection.open()
    existing = store.list_sources() if collection.ready else {}
    rows = _document_rows(documents)
    report.documents = len(rows)
    logger.info(
        "ray ingest: %d documents, %d chunks already stored; %d workers x (%.2g CPU, %.2g GPU)",
        len(rows),
        len(existing),
        options.workers,
        cpus,
        gpus,
    )
    seen_ids: dict[str, set[str]] = {row["source"]: set() for row in rows}
    if rows:
        dataset = ray.data.from_items(
            rows, override_num_blocks=max(1, math.ceil(len(rows) / options.documents_per_batch))
        ).map_batches(
            embedder_class,
            fn_constructor_kwargs={
                "recipe": recipe,
                "cache_path": None if cache is None else str(cache.path),
                "existing_ids": ray.put(frozenset(existing)),
                "cpu_threads": max(int(cpus), 1),
            },
            batch_size=options.documents_per_batch,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=options.workers),
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=options.max_restarts,
            max_task_retries=options.max_task_retries,
        )
        _write(dataset, collection, cache, options.write_batch, seen_ids)
    collection.open()
    by_source: dict[str, set[str]] = {}
    for cid, source in existing.items():
        by_source.setdefault(source, set()).add(cid)
    stale = [cid for source, ids in seen_ids.items() for cid in by_source.get(source, set()) - ids]
    if prune:
        kept = [Path(s.path).resolve().as_posix() for s in skipped]
        stale += [
            cid for cid, source in existing.items() if source not in seen_ids and not _under(source, kept)
        ]
    if stale:
        store.delete(stale)
        report.deleted = len(stale)
    report.skipped = [str(s) for s in skipped]
    report.seconds = time.monotonic() - started
    logger.info(
        "ray ingest: %d documents into %s/%s: %d chunks, %d upserted, %d embedded, %d deleted in %.1fs",
        report.documents,
        store.name,
        store.collection,
        report.chunks,
        report.upserted,
        report.embedded,
        report.deleted,
        report.seconds,
    )
    return report


def _under(source: str, resolved: list[str]) -> bool:
    """Whether ``source`` is one of the skipped paths or inside one (``path#record``, ``folder/file``)."""
    return any(source == p or source.startswith((f"{p}#", f"{p}/")) for p in resolved)


class _Collection:
    """The store's collection, created or checked once the probe has told the model's facts."""

    def __init__(
        self,
        store: VectorStore,
        probe: Any,
        quantization: Quantization | None,
        model_options: Mapping[str, object] | None,
        report: IngestReport,
    ) -> None:
        self.store, self.probe, self.report = store, probe, report
        self.quantization = quantization
        self.model_options = dict(model_options or {})
        self.ready = False

    def open(self) -> None:
        if self.ready:
            return
        probed = ray.get(self.probe)
        facts = ModelFacts.from_json(probed["model_name"], probed["facts"])
        spec = CollectionSpec(
            name=self.store.collection,
            dimension=int(probed["dimension"]),
            model_identity=facts.model_identity,
            full_dimension=int(facts.embedding_dim or 0),
            model_name=facts.model_name,
            layout="dense",
            quantization=self.quantization,
            model_options=self.model_options,
        )
        stored = self.store.ensure_collection(spec)
        self.report.collection = {"name": stored.name, "dimension": stored.dimension}
        self.ready = True


def _write(
    dataset: Any,
    collection: _Collection,
    cache: EmbeddingCache | None,
    batch_size: int,
    seen_ids: dict[str, set[str]],
) -> None:
    """Stream the actors' rows back and upsert them; the driver is the one writer of the store and
    of the cache."""
    store, report = collection.store, collection.report
    last_log = time.monotonic()
    for batch in dataset.iter_batches(batch_size=batch_size, batch_format="numpy"):
        collection.open()
        records = []
        for cid, source, payload, vector, existing in zip(
            batch["id"], batch["source"], batch["payload"], batch["vector"], batch["existing"], strict=True
        ):
            report.chunks += 1
            seen_ids[str(source)].add(str(cid))
            if existing:
                report.chunks_existing += 1
            else:
                records.append(
                    ChunkRecord(str(cid), np.asarray(vector, dtype=np.float32), json.loads(payload))
                )
        if records:
            store.upsert(records)
            report.upserted += len(records)
        computed = {
            bytes(key): np.asarray(vec, dtype=np.float32)
            for key, vec in zip(batch["cache_key"], batch["cache_vector"], strict=True)
            if key
        }
        report.embedded += len(computed)  # texts the model ran on (cache misses)
        if cache is not None and computed:
            cache.put_many(computed)
        if time.monotonic() - last_log >= _PROGRESS_EVERY_S:
            last_log = time.monotonic()
            logger.info(
                "ray ingest: %d chunks so far (%d written, %d already stored)",
                report.chunks,
                report.upserted,
                report.chunks_existing,
            )
