"""Measure each retrieval mode on a BEIR-layout dataset, through the same pipeline users run.

The corpus goes through :class:`~poolrag.ingest.IngestPipeline` (chunker, cache, ids, idempotent
upserts), so a second evaluation embeds nothing and the numbers describe the collection users
would actually search. Queries are embedded in batches first (through the cache, so each
retrieval finds its query vector there), then every mode retrieves chunks; a document scores the
best of its chunks, which is how a reader of the results would credit it.

Modes:
  ``dense``, ``sparse``, ``hybrid``: the retriever's first stage alone;
  ``hybrid+rerank``: the hybrid ranking reranked by a cross-encoder, its scores fused with the
  hybrid ones (the default second stage); ``hybrid+rerank-replace``: the cross-encoder's order alone.
The reranked modes rerank as ``poolrag search --hybrid --rerank`` does: the first
:func:`~poolrag.retrieval.funnel.default_candidates` chunks of the fused ranking (``max(10k, 50)``,
more where a run widens past them), by the same default fusion ``hybrid`` reports, so the table
says what the second stage search runs adds to it, over the pool it reranks there.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from poolrag.backend import PoolingBackend
from poolrag.cache.embedder import CachedEmbedder
from poolrag.counts import check_count
from poolrag.errors import InvalidInputError
from poolrag.evaluation.beir import BeirDataset, BeirDocument, BeirQuery, first_few
from poolrag.evaluation.metrics import evaluate
from poolrag.ingest.pdf_pages import PageRendering
from poolrag.ingest.pipeline import IngestPipeline, IngestReport
from poolrag.ingest.readers import Document
from poolrag.ingest.visual_documents import VisualDocument, read_visual_file
from poolrag.retrieval.collection_checks import existing_spec
from poolrag.retrieval.funnel import Retriever, default_candidates
from poolrag.retrieval.fusion import SecondStage
from poolrag.retrieval.rerank import CrossEncoderReranker
from poolrag.retrieval.rerank_language import default_rerank_weight, reranker_languages
from poolrag.retrieval.results import SearchResult
from poolrag.retrieval.sparse_queries import NoQueryTermsError, SparseQueryEncoder
from poolrag.stores.language_prior import collection_default_fusion
from poolrag.stores.retrieval_record import saved_record
from poolrag.text_validity import text_problem

logger = logging.getLogger(__name__)

EVAL_MODES: tuple[str, ...] = ("dense", "sparse", "hybrid", "hybrid+rerank", "hybrid+rerank-replace", "saved")
#: ``saved``: hybrid fused as the collection's record says (``--tune --save``, perhaps on another
#: split), which is what ``poolrag search`` does; the ``hybrid`` modes use the default fusion.
SAVED_MODE = "saved"
#: Modes that rerank, and the second stage each uses.
RERANK_MODES: Mapping[str, SecondStage] = {
    "hybrid+rerank": SecondStage.FUSE,
    "hybrid+rerank-replace": SecondStage.REPLACE,
}
SPARSE_MODES = frozenset({"sparse", "hybrid", SAVED_MODE, *RERANK_MODES})
#: The payload field naming a chunk's corpus document.
CORPUS_ID_KEY = "corpus_id"


def parse_modes(text: str | Sequence[str]) -> list[str]:
    """``"dense,hybrid"`` (or a list) as known modes, in the order given, without repeats."""
    names = text.split(",") if isinstance(text, str) else list(text)
    modes = list(dict.fromkeys(name.strip() for name in names if name.strip()))
    unknown = [m for m in modes if m not in EVAL_MODES]
    if unknown or not modes:
        raise InvalidInputError(
            f"unknown mode {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"choose from {', '.join(EVAL_MODES)}"
        )
    return modes


def corpus_documents(
    dataset: BeirDataset, images: PageRendering | None = None, ids: set[str] | None = None
) -> Iterator[Document | VisualDocument]:
    """The corpus as ingest documents: the title heads the text (BEIR's convention), the corpus id
    rides in every chunk's payload, and the source is ``corpus.jsonl#id`` as ``poolrag ingest`` names
    a JSONL record. A row naming an ``image`` is that image (a PDF: its pages), for a model that
    reads images (``images``: how PDF pages are rendered); to any other model it is an error.
    ``ids`` collects every corpus id read, those left out as unreadable included."""
    path = dataset.corpus_path.resolve().as_posix()
    for doc in dataset.documents():
        if ids is not None:
            ids.add(doc.id)
        metadata = {k: v for k, v in doc.metadata.items() if isinstance(v, str | int | float | bool)}
        metadata |= {"title": doc.title, CORPUS_ID_KEY: doc.id}
        if doc.image is not None:
            yield _image_document(dataset, doc, f"{path}#{doc.id}", metadata, images)
            continue
        text = _text(doc)
        if (problem := text_problem(text)) is not None:  # said, as poolrag ingest says it of the same record
            logger.warning("%s: document %r %s; left out", dataset.corpus_path, doc.id, problem)
            continue
        yield Document(f"{path}#{doc.id}", text, metadata)


def _corpus_document_count(dataset: BeirDataset) -> int:
    """How many documents :func:`corpus_documents` yields: the ingest progress bar's total. One more
    read of the corpus file, seconds against the minutes its embedding takes."""
    return sum(1 for doc in dataset.documents() if doc.image is not None or text_problem(_text(doc)) is None)


def _check_searchable_corpus(dataset: BeirDataset) -> None:
    """Refuse a corpus of which no document would be ingested: every mode would score 0 on an empty
    collection, a table that looks like a result. The corpus is read up to its first usable row."""
    left_out = 0
    for doc in dataset.documents():
        if doc.image is not None or text_problem(_text(doc)) is None:
            return
        left_out += 1
    if not left_out:
        raise InvalidInputError(f"{dataset.corpus_path}: no documents; nothing to search")
    raise InvalidInputError(
        f"{dataset.corpus_path}: no document with text or an image ({left_out} left out); nothing to search"
    )


def _text(doc: BeirDocument) -> str:
    """A text row as it is embedded: the title heads the text (BEIR's convention)."""
    return f"{doc.title}\n\n{doc.text}" if doc.title else doc.text


def _image_document(
    dataset: BeirDataset,
    doc: BeirDocument,
    source: str,
    metadata: dict[str, Any],
    images: PageRendering | None,
) -> VisualDocument:
    """The image or PDF a corpus row names, checked as ``poolrag ingest`` checks one; a file no model
    can read stops the evaluation (a silently dropped document would change every metric)."""
    assert doc.image is not None
    if images is None:
        raise InvalidInputError(
            f"{dataset.corpus_path}: document {doc.id!r} is an image ({doc.image}), and this model reads "
            "text only: evaluate an image corpus with a model that reads images (CLIP, SigLIP, ColPali)"
        )
    try:
        read = read_visual_file(dataset.image_path(doc.image), images)
    except (InvalidInputError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise InvalidInputError(
            f"{dataset.corpus_path}: document {doc.id!r} ({doc.image}): {reason}"
        ) from None
    return dataclasses.replace(read, source=source, metadata={**read.metadata, **metadata})


@dataclass
class EvalReport:
    """Per mode the averaged metrics (``{"recall@10": ...}``) and the document run they came from."""

    metrics: dict[str, dict[str, float]]
    runs: dict[str, dict[str, list[tuple[str, float]]]]
    ingest: IngestReport
    queries: int
    queries_embedded: int = 0
    settings: dict[str, object] = field(default_factory=dict)
    chunks: int = 0  # in the collection searched (a resumed ingest chunks only what it had left)


def write_trec_runs(runs: Mapping[str, Mapping[str, list[tuple[str, float]]]], folder: Path) -> list[Path]:
    """Each mode's document run as a TREC run file, ``run.<mode>.trec`` in ``folder`` (made when
    missing): ``query-id Q0 doc-id rank score poolrag-<mode>`` per line, what trec_eval, pytrec_eval,
    ir_measures and ranx read, so a run can be rescored or tested for significance elsewhere.

    Those split a line at whitespace, so an id holding any is refused before a file is written
    (written, ``doc 7`` would be read back as document ``doc`` ranked ``7``)."""
    for run in runs.values():
        for query_id, ranked in run.items():
            for id_ in (query_id, *(doc_id for doc_id, _ in ranked)):
                if not id_ or any(char.isspace() for char in id_):
                    raise InvalidInputError(
                        f"id {id_!r} cannot be written to a TREC run file, whose fields are separated "
                        "by whitespace; give the dataset's queries and documents ids without spaces"
                    )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for mode, run in runs.items():
        path = folder / f"run.{mode}.trec"
        with path.open("w", encoding="utf-8") as out:
            for query_id, ranked in run.items():
                for rank, (doc_id, score) in enumerate(ranked, start=1):
                    out.write(f"{query_id} Q0 {doc_id} {rank} {float(score)!r} poolrag-{mode}\n")
        written.append(path)
    return written


def documents_of(results: Sequence[SearchResult]) -> list[tuple[str, float]]:
    """Chunk hits as a document run: each corpus document scored by its best chunk, best first."""
    return best_per_document((str(r.payload.get(CORPUS_ID_KEY, r.source)), r.score) for r in results)


def best_per_document(chunks: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """(document id, score) per chunk as a document run: each document at its best chunk's score,
    best first (the one rule of the modes' runs and of ``--tune``'s candidates)."""
    best: dict[str, float] = {}
    for doc_id, score in chunks:
        if doc_id not in best or score > best[doc_id]:
            best[doc_id] = score
    return sorted(best.items(), key=lambda pair: -pair[1])


def sparse_ranking(retriever: Retriever, text: str, depth: int) -> list[SearchResult]:
    """One query's sparse ranking: empty for a query with no term the sparse encoder keeps (an emoji,
    only stop words, a script the vocabulary reads as ``[UNK]``), as BM25 ranks it in BEIR. A single
    search refuses such a query; here it stopped the whole evaluation."""
    try:
        return retriever.search(text, depth, mode="sparse")
    except NoQueryTermsError:
        return []


def without_own_document(
    query_id: str, ranked: list[tuple[str, float]], judged: Mapping[str, int]
) -> list[tuple[str, float]]:
    """``ranked`` less the document whose id is the query's own, unless the qrels judge it for that
    query. ArguAna and Quora take each query from the corpus under the same id, so that document
    comes first and answers nothing; BEIR's ``EvaluateRetrieval.evaluate`` (``ignore_identical_ids``,
    on by default) and MTEB on those sets drop it, and their published tables are computed so. A
    judged one stays, where BEIR drops it too: its id merely collides with the query's, and the
    judgement says what it is worth (no published set judges a query's own id)."""
    if query_id in judged:
        return ranked
    return [pair for pair in ranked if pair[0] != query_id]


def rerank_candidates(k: int, chunks: int) -> int:
    """The chunks a reranked mode (or a ``--tune`` candidate with a reranker share) reranks when it
    keeps ``chunks`` for k documents: the stage-1 candidates ``poolrag search --rerank -k K`` reranks by
    default (:func:`~poolrag.retrieval.funnel.default_candidates`), or ``chunks`` where a run widened
    past them. Reranking only the ``chunks`` kept (3k) missed a relevant document that search's second
    stage finds deeper, so eval and a saved rerank share described another pool than search reranks."""
    return max(chunks, default_candidates(k))


def widened_documents(
    documents: Callable[[int], tuple[int, list[tuple[str, float]]]], depth: int, k: int, stored: int
) -> list[tuple[str, float]]:
    """``documents(chunks)``: how many chunks a search for ``chunks`` found, and the document run they
    give; searched ``depth`` chunks deep, then twice as deep until k distinct documents remain or every
    one of the ``stored`` chunks was searched (long documents fill 3k chunks with a few documents, and
    a relevant one past them counted as missed). Every mode and every ``--tune`` candidate widens by
    this one rule, so their runs compare."""
    while True:
        found, ranked = documents(depth)
        if len(ranked) >= k or found < depth or depth >= stored:
            return ranked
        depth = min(2 * depth, stored)


class _RememberingReranker(CrossEncoderReranker):
    """One cross-encoder pass per (query, passage) in a run: the reranked modes rerank the same
    fused lists (``eval --rerank`` scored every pair once per mode, half its time)."""

    def __init__(self, backend: PoolingBackend, memo: dict[tuple[str, str], float], **options: Any) -> None:
        super().__init__(backend, **options)
        self._memo = memo

    def scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        missing = [p for p in dict.fromkeys(passages) if (query, p) not in self._memo]
        if missing:
            for passage, score in zip(missing, super().scores(query, missing).tolist(), strict=True):
                self._memo[(query, passage)] = score
        return np.asarray([self._memo[(query, p)] for p in passages], dtype=np.float64)


class Evaluation:
    """Ingest a BEIR dataset and score retrieval modes on it.

    Args:
        pipeline: the ingest pipeline for the evaluation's collection (dense encoder, chunker, and a
            sparse encoder when a sparse or hybrid mode is measured).
        embedder: the dense model behind the pipeline's encoder (queries go through it).
        sparse_encoder: query side of the sparse field (the pipeline's sparse encoder serves: BM25,
            or a learned one, whose queries go through the same model with ``input_type="query"``).
        reranker: a cross-encoder backend, needed by the ``hybrid+rerank*`` modes.
        rerank_weight: the reranker's share in the fused second stage (``None``: the collection's
            default for the reranker's languages,
            :func:`~poolrag.retrieval.rerank_language.default_rerank_weight`).
    """

    def __init__(
        self,
        pipeline: IngestPipeline,
        embedder: CachedEmbedder,
        *,
        sparse_encoder: SparseQueryEncoder | None = None,
        reranker: PoolingBackend | None = None,
        rerank_weight: float | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.embedder = embedder
        self.sparse_encoder = sparse_encoder
        self.reranker = reranker
        self.rerank_weight = rerank_weight

    def run(
        self,
        dataset: BeirDataset,
        modes: Sequence[str] = ("dense", "sparse", "hybrid"),
        *,
        k: int = 10,
        split: str = "test",
        query_batch_size: int = 64,
        prefetch: int | None = None,
        prune: bool = False,
    ) -> EvalReport:
        """Ingest the corpus (nothing new on a re-run), then retrieve every judged query in each mode.

        ``prefetch``: depth of each hybrid leg (default: the retriever's, the hits fused but at least 50).
        ``prune``: the collection is this evaluation's own, so documents no longer in the corpus (or
        another corpus's) are deleted rather than searched.
        """
        modes = parse_modes(modes)
        check_count(k, "k")
        reranked = [m for m in modes if m in RERANK_MODES]
        if reranked and self.reranker is None:
            raise InvalidInputError(f"modes {', '.join(reranked)} need a reranker")
        if any(m in SPARSE_MODES for m in modes) and (
            self.sparse_encoder is None or self.pipeline.sparse_encoder is None
        ):
            raise InvalidInputError(
                "sparse and hybrid modes need a sparse encoder for the corpus and queries"
            )
        # The small files first: a broken qrels or queries file is reported before anything is embedded.
        qrels = dataset.qrels(split)
        query_ids = [q.id for q in dataset.queries()]
        if not query_ids:
            raise InvalidInputError(
                f"{dataset.queries_path}: no queries (the file is empty); nothing to evaluate"
            )
        if not any(i in qrels for i in query_ids):
            raise InvalidInputError(
                f"no query in {dataset.queries_path} is judged in {dataset.qrels_path(split)}; "
                "nothing to evaluate"
            )
        queries, qrels = dataset.judged_queries(split)
        if not queries:
            raise InvalidInputError(
                f"no query in {dataset.qrels_path(split)} has a relevant document (a grade above 0); "
                "nothing to evaluate"
            )
        _check_searchable_corpus(dataset)
        dataset.check_judged_documents_exist(split, qrels)
        # Known before the corpus is read: a new collection holds no record, nor does one never tuned.
        stored = self.pipeline.store.read_spec()
        if SAVED_MODE in modes and (stored is None or saved_record(stored) is None):
            raise InvalidInputError(
                f"mode {SAVED_MODE} measures the setting a collection saved, and collection "
                f"{self.pipeline.store.collection!r} holds none: run poolrag eval --tune --save first "
                "(on another split, to report this one held out)"
            )
        images = PageRendering() if self.embedder.facts.reads_images else None
        corpus_ids: set[str] = set()
        total = _corpus_document_count(dataset) if self.pipeline.progress else None
        ingest = self.pipeline.run(corpus_documents(dataset, images, corpus_ids), prune=prune, total=total)
        dataset.warn_unknown_documents(split, qrels, corpus_ids)
        own = [q.id for q in queries if q.id in corpus_ids and q.id not in qrels[q.id]]
        if own:
            logger.warning(
                "%d queries share their id with a corpus document their qrels do not judge (as ArguAna's "
                "and Quora's do); it is left out of their rankings, as BEIR and MTEB leave it out: %s",
                len(own),
                first_few(own),
            )
        before = self.embedder.misses
        for start in range(0, len(queries), query_batch_size):
            batch = queries[start : start + query_batch_size]
            self.embedder.embed([q.text for q in batch], input_type="query")
        embedded = self.embedder.misses - before
        saved = saved_record(existing_spec(self.pipeline.store))
        # Chunks counted in the collection, since a resumed run chunks only the documents it had left.
        stored = self.pipeline.store.count()
        depth = k if stored <= ingest.documents else 3 * k
        metrics: dict[str, dict[str, float]] = {}
        runs: dict[str, dict[str, list[tuple[str, float]]]] = {}
        rerank_scores: dict[tuple[str, str], float] = {}
        for mode in modes:
            retriever = self._retriever(mode, rerank_scores)
            runs[mode] = {
                q.id: self._documents(retriever, q, qrels[q.id], mode, depth, prefetch, k, stored)
                for q in queries
            }
            metrics[mode] = evaluate(runs[mode], qrels, (k,))
            logger.info("%s: %s", mode, metrics[mode])
        settings = {
            "k": k,
            "chunks_per_query": depth,
            "rerank_candidates": rerank_candidates(k, depth) if reranked else None,
            "prefetch": prefetch,
            "split": split,
            "saved_setting": None if saved is None else saved.to_metadata(),
        }
        return EvalReport(metrics, runs, ingest, len(queries), embedded, settings, stored)

    def _retriever(self, mode: str, rerank_scores: dict[tuple[str, str], float]) -> Retriever:
        reranker = None
        if mode in RERANK_MODES:
            assert self.reranker is not None
            weight = self.rerank_weight
            if weight is None:
                spec = existing_spec(self.pipeline.store)
                weight = default_rerank_weight(spec, reranker_languages(self.reranker))
            reranker = _RememberingReranker(
                self.reranker, rerank_scores, second_stage=RERANK_MODES[mode], weight=weight
            )
        return Retriever(
            self.pipeline.store, self.embedder, reranker=reranker, sparse_encoder=self.sparse_encoder
        )

    def _documents(
        self,
        retriever: Retriever,
        query: BeirQuery,
        judged: Mapping[str, int],
        mode: str,
        depth: int,
        prefetch: int | None,
        k: int,
        stored: int,
    ) -> list[tuple[str, float]]:
        """The query's ranked documents, each at its best chunk, its own unjudged one left out
        (:func:`without_own_document`), widened as :func:`widened_documents` says."""

        def documents(chunks: int) -> tuple[int, list[tuple[str, float]]]:
            hits = self._search(retriever, query, mode, chunks, prefetch, k=k)
            return len(hits), without_own_document(query.id, documents_of(hits), judged)

        return widened_documents(documents, depth, k, stored)

    @staticmethod
    def _search(
        retriever: Retriever,
        query: BeirQuery,
        mode: str,
        depth: int,
        prefetch: int | None,
        k: int | None = None,
    ) -> list[SearchResult]:
        """One query's chunks in ``mode``, ``depth`` of them; ``k``: the documents the run wants, which
        sizes a reranked mode's candidates (default ``depth``)."""
        if mode == SAVED_MODE:  # no fusion named: the retriever fuses as the record says
            return retriever.search(query.text, depth, mode="hybrid", prefetch=prefetch, candidates=depth)
        if mode == "hybrid" or mode in RERANK_MODES:
            # Fused by the collection's default rule even where a tuned setting was saved (``--tune``
            # reports that one); the default leans on BM25 where the model does not cover the recorded
            # language. The reranked modes rerank the fused ranking as deep as search reranks it, and
            # keep its first ``depth`` chunks as plain hybrid does.
            fusion = collection_default_fusion(retriever.spec)
            pool = rerank_candidates(depth if k is None else k, depth) if mode in RERANK_MODES else depth
            return retriever.search(
                query.text, depth, mode="hybrid", prefetch=prefetch, candidates=pool, fusion=fusion
            )
        if mode == "sparse":
            return sparse_ranking(retriever, query.text, depth)
        return retriever.search(query.text, depth, mode=mode)  # type: ignore[arg-type]
