"""Sparse vectors for chunks, written next to the dense ones in collections with a sparse field.

Lexical BM25 needs no second model: the term counts come from the embedding model's own
tokenizer (cached, see :mod:`poolrag.cache.term_counts`). A stored document vector holds BM25's
term-frequency half, normalised by the collection's average chunk length; the IDF half is the
store's business at query time. That average is pinned once per collection (given, or taken from
the first batch written) and recorded in the collection, so every later run, a resumed one
included, writes the same vector for the same chunk: re-runs and resumes stay idempotent, and no
stored vector ever has to be rewritten because the corpus grew.

Learned sparse vectors (a SPLADE model, or BGE-M3's own sparse head) are model outputs: cached as
sparse vectors under the sparse model's identity, weighed by plain inner product in the store.
The collection records which model made them, as data only, so search can refuse another one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from poolrag.cache.sparse_vectors import CachedSparseVectors
from poolrag.cache.sqlite_store import EmbeddingCache
from poolrag.cache.term_counts import CachedTermCounter
from poolrag.errors import InvalidInputError
from poolrag.model_facts import ModelFacts, same_weights, weights_fingerprint
from poolrag.params import PoolingParams, PoolingTask
from poolrag.sparse.bm25 import BM25_RECORD_KEY, BM25Encoder, BM25Parameters
from poolrag.sparse.language_detection import detect_language
from poolrag.sparse.vector import SparseVector
from poolrag.sparse.words import DEFAULT_LANGUAGE, LANGUAGES, WordAnalyzer, analyzer_name, recorded_analyzer
from poolrag.stores.errors import CollectionMismatchError
from poolrag.stores.language_prior import LANGUAGE_CODES, LANGUAGES_RECORD_KEY, LanguageRecord

if TYPE_CHECKING:
    from poolrag.engine import Engine
    from poolrag.outputs import PoolingOutput, PoolingRequestOutput

#: Where a collection records the model behind its learned sparse vectors.
LEARNED_SPARSE_OPTIONS_KEY = "learned_sparse"
#: ``source`` values of that record: the main model's own sparse head, or a separate sparse model.
OWN_HEAD, SPARSE_MODEL = "main-model", "sparse-model"


logger = logging.getLogger(__name__)
#: The share of unknown word pieces in a new BM25 collection's first batch that is worth a warning.
UNKNOWN_SHARE_WARNED = 0.2


class SparseChunkEncoder(Protocol):
    kind: str  # the collection's sparse field: "bm25" | "learned"
    options_key: str  # where settings() are recorded in the collection's model_options
    run_identity: str  # what sets this source apart in the checkpoint's run key

    @property
    def computed(self) -> int:
        """Texts that went through the tokenizer or model (cache misses)."""

    @property
    def pending(self) -> bool:
        """Settings are still to be fixed from a first batch (:meth:`adopt`)."""

    def settings(self) -> dict[str, Any]:
        """What to record in the collection so later runs encode the same way."""

    def adopt(self, recorded: dict[str, Any] | None, first_batch: Sequence[str]) -> None:
        """Take the collection's recorded settings, or (when none are fixed yet) fix them from
        ``first_batch``; a no-op once fixed."""

    def encode(self, texts: Sequence[str]) -> list[SparseVector]: ...


class BM25ChunkEncoder:
    """BM25 document vectors over a model's tokenizer, term counts through the cache.

    Args:
        encoder: the BM25 encoder (tokenizer and ``k1``/``b``).
        tokenizer_identity: the model identity; keys the cached counts.
        cache: the embedding cache, or ``None``.
        avg_doc_length: the collection's mean chunk length in terms; ``None`` takes the collection's
            recorded value, or the mean of the first batch for a new collection.
        languages: the model's and the collection's languages, recorded so the hybrid default can
            raise BM25's share where the model does not cover the collection's language
            (:mod:`poolrag.stores.language_prior`); written when the collection is created.
    """

    kind = "bm25"
    options_key = BM25_RECORD_KEY
    run_identity = "bm25"

    def __init__(
        self,
        encoder: BM25Encoder,
        tokenizer_identity: str,
        cache: EmbeddingCache | None = None,
        *,
        avg_doc_length: float | None = None,
        languages: LanguageRecord | None = None,
    ) -> None:
        if avg_doc_length is not None and not (math.isfinite(avg_doc_length) and avg_doc_length > 0):
            raise InvalidInputError(f"the average chunk length must be a positive number: {avg_doc_length}")
        self.encoder = encoder
        self._tokenizer_identity, self._cache = tokenizer_identity, cache
        self.counter = CachedTermCounter(encoder, tokenizer_identity, cache)
        self.avg_doc_length = avg_doc_length
        self.languages = languages
        self._first_counts: dict[str, dict[int, int]] = {}  # the first batch's, counted by adopt()

    @property
    def computed(self) -> int:
        return self.counter.misses

    @property
    def pending(self) -> bool:
        return self.avg_doc_length is None

    def term_counts(self, texts: Sequence[str]) -> list[dict[int, int]]:
        """Each text's term counts; those of the first batch, counted to fix the average length, are
        not counted again (without a cache, a run counted and reported them twice)."""
        ahead = self._first_counts
        rest = [text for text in texts if text not in ahead]
        counted = iter(self.counter.term_counts(rest) if rest else ())
        return [ahead[text] if text in ahead else next(counted) for text in texts]

    def settings(self) -> dict[str, Any]:
        parameters = self.encoder.parameters
        settings: dict[str, Any] = {
            "avg_doc_length": self.avg_doc_length,
            "k1": parameters.k1,
            "b": parameters.b,
            "analyzer": self.encoder.analyzer_record(),
        }
        if self.languages is not None:
            settings[LANGUAGES_RECORD_KEY] = self.languages.to_metadata()
        return settings

    def adopt(self, recorded: dict[str, Any] | None, first_batch: Sequence[str]) -> None:
        """Also refuses a collection whose terms another analyzer made (a collection recorded before
        analyzers were holds word pieces): mixing the two would match nothing between them."""
        if recorded:
            stored = recorded_analyzer(recorded)
            if stored != self.encoder.analyzer and not self._takes_recorded(stored):
                raise CollectionMismatchError(
                    f"the collection's BM25 terms were made by the {analyzer_name(stored)} analyzer, but "
                    f"this run uses {analyzer_name(self.encoder.analyzer)}; use the same --analyzer and "
                    "--language, or another --collection"
                )
        if recorded and recorded.get("avg_doc_length") is not None:
            self._check_declared_language(recorded)
            try:
                parameters = BM25Parameters(float(recorded["k1"]), float(recorded["b"]))
                self.avg_doc_length = float(recorded["avg_doc_length"])
            except (KeyError, TypeError, ValueError) as exc:
                problem = f"the collection's recorded BM25 settings are unreadable: {exc}"
                raise InvalidInputError(problem) from None
            self.encoder.parameters = parameters
            return
        if self.avg_doc_length is None and first_batch:
            self._detect_language(first_batch)  # may choose the stemmer the lengths are counted with
            self._warn_unknown_pieces(first_batch)
            counts = self.counter.term_counts(first_batch)
            self._first_counts = dict(zip(first_batch, counts, strict=True))
            lengths = [sum(c.values()) for c in counts]
            self.avg_doc_length = max(sum(lengths) / len(lengths), 1.0)

    def _check_declared_language(self, recorded: dict[str, Any]) -> None:
        """Refuse a declared ``--language`` other than the one the collection recorded: the record is
        fixed with its first batch, so the flag would change nothing, and an English collection
        declared Italian would keep the English hybrid default without a word."""
        declared = None if self.languages is None else self.languages.collection
        stored = recorded.get(LANGUAGES_RECORD_KEY)
        if declared is None or not isinstance(stored, dict) or stored.get("collection") == declared:
            return
        was = stored.get("collection") or "no language"
        named = next((name for name, code in LANGUAGE_CODES.items() if code == declared), declared)
        raise CollectionMismatchError(
            f"the collection recorded its language as {was} with its first batch, and it stays so; this "
            f"run declares --language {named}: drop --language, or ingest into another --collection"
        )

    def _warn_unknown_pieces(self, first_batch: Sequence[str]) -> None:
        """Says when a new collection's word pieces are largely the model's unknown token: BM25 drops
        it, so such text (Thai, Chinese for an English model) got no terms and nothing said so."""
        share = self.encoder.unknown_share(first_batch)
        if share >= UNKNOWN_SHARE_WARNED:
            logger.warning(
                "%.0f%% of the first batch's word pieces are the model's unknown token, which BM25 cannot "
                "match (text in a script its vocabulary lacks); --analyzer words counts that text's words",
                100 * share,
            )

    def _detect_language(self, first_batch: Sequence[str]) -> None:
        """A new collection whose language nobody declared gets the one its first batch is written in:
        recorded beside the model card's languages (when the card names some, else it would change
        nothing), and as the word analyzer's language, which was the default one."""
        languages = self.languages
        if languages is not None and languages.collection is not None:
            return
        detected = detect_language(first_batch)
        if detected is None:
            return
        logger.info("the collection's language looks like %s (declare it with --language)", detected)
        if languages is not None and languages.model:
            self.languages = LanguageRecord.declared(languages.model, detected)
        self._stem_in(detected)

    def _takes_recorded(self, stored: WordAnalyzer | None) -> bool:
        """What no flag of this run chose is the collection's: how it splits CJK text (one written
        before bigrams keeps whole runs), words with marks (one written before keeps splitting at
        each mark) and vowel marks (one written before keeps them) and, undeclared, the language its
        first batch was detected in, so re-running or resuming the command that made it is not
        refused for a setting the user never gave. A declared ``--language`` or another analyzer
        is still refused."""
        analyzer = self.encoder.analyzer
        if stored is None or analyzer is None:
            return False
        declared = self.languages is not None and self.languages.collection is not None
        undeclared = not declared and analyzer.language == DEFAULT_LANGUAGE
        language = stored.language if undeclared else analyzer.language
        taken = dataclasses.replace(
            analyzer,
            language=language,
            cjk_bigrams=stored.cjk_bigrams,
            unicode_words=stored.unicode_words,
            drop_vowel_marks=stored.drop_vowel_marks,
        )
        if taken != stored:
            return False
        self._analyse_with(taken)
        return True

    def _stem_in(self, language: str) -> None:
        """Undeclared, the word analyzer was the default language's; the detected one stems and drops
        stop words in its own (debian-faq-de sparse MRR@10 0.351 with English stems, 0.393 German)."""
        analyzer = self.encoder.analyzer
        if analyzer is None or analyzer.language != DEFAULT_LANGUAGE or language not in LANGUAGES:
            return
        self._analyse_with(dataclasses.replace(analyzer, language=language))

    def _analyse_with(self, analyzer: WordAnalyzer) -> None:
        self.encoder = BM25Encoder(None, self.encoder.parameters, analyzer=analyzer)
        self.counter = CachedTermCounter(self.encoder, self._tokenizer_identity, self._cache)
        self._first_counts = {}  # counted by another analyzer

    def encode(self, texts: Sequence[str]) -> list[SparseVector]:
        if self.avg_doc_length is None:
            raise InvalidInputError("BM25 chunk vectors need the collection's average length; call adopt()")
        return self.encoder.document_vectors(self.term_counts(texts), self.avg_doc_length)

    def analyzer_record(self) -> dict[str, Any]:
        """How text is split into terms (what the collection records; retrievers check it)."""
        return self.encoder.analyzer_record()

    def encode_queries(self, texts: Sequence[str]) -> list[SparseVector]:
        """Unit-weight query vectors: the store multiplies each term by its IDF."""
        return self.encoder.encode_queries(texts)


def collection_languages(model_folder: str | None, language: str | None) -> LanguageRecord | None:
    """What a new hybrid collection records about languages: the model card's codes and the declared
    ``language`` (``None``: the BM25 encoder detects it from the first batch); ``None`` when the card
    names none and nothing was declared (the hybrid default then stays the default)."""
    from poolrag.config.model_card import declared_languages

    model = declared_languages(model_folder) if model_folder is not None else ()
    if language is None and not model:
        return None
    return LanguageRecord.declared(model, language)


def tokenizer_identity(engine: Engine) -> str:
    """What names ``engine``'s tokenizer in the term-count cache: its model's identity, whose weights
    fingerprint digests the folder's own tokenizer files, and, for an engine given another tokenizer
    (``tokenizer`` / ``tokenizer_revision``), which that fingerprint does not see, its outputs'
    fingerprint too, which digests that tokenizer's files (so counts of the folder's own tokenizer
    keep their keys)."""
    facts, args = engine.facts, engine.engine_args
    if args.tokenizer is not None or args.tokenizer_revision is not None:
        return f"{facts.model_identity}+tokenizer@{facts.output_fingerprint}"
    return facts.model_identity


def bm25_for_model(
    tokenizer: Any,
    model_identity: str,
    cache: EmbeddingCache | None = None,
    analyzer: WordAnalyzer | None = None,
    languages: LanguageRecord | None = None,
) -> BM25ChunkEncoder:
    """Lexical BM25 over ``analyzer``'s words, or the embedding model's own word pieces when ``None``.

    ``model_identity`` names the tokenizer's counts in ``cache``: pass :func:`tokenizer_identity`
    of the engine whose tokenizer this is (its model's identity alone does not change with a
    ``tokenizer`` option)."""
    encoder = BM25Encoder(None, analyzer=analyzer) if analyzer is not None else BM25Encoder(tokenizer)
    return BM25ChunkEncoder(encoder, model_identity, cache, languages=languages)


class SparseEmbedder(Protocol):
    """A model that makes learned sparse vectors (:class:`~poolrag.Engine` with a SPLADE or BGE-M3 model)."""

    @property
    def facts(self) -> ModelFacts: ...

    def sparse_embed(
        self, prompts: Sequence[str], pooling_params: PoolingParams | None = None
    ) -> list[SparseVector]: ...

    def encode(
        self,
        prompts: Sequence[str],
        pooling_task: PoolingTask = ...,
        pooling_params: PoolingParams | None = None,
    ) -> list[PoolingRequestOutput[PoolingOutput]]: ...


class LearnedSparseChunkEncoder:
    """Learned sparse document vectors (SPLADE, BGE-M3's head) through the cache; queries by the same model.

    Args:
        model: the sparse model, loaded once.
        cache: the embedding cache, or ``None``.
        source: :data:`OWN_HEAD` when ``model`` is also the dense model (BGE-M3: its dense pass fills
            :attr:`documents` through :class:`~poolrag.ingest.shared_pass.SharedPassBackend`), else
            :data:`SPARSE_MODEL`.
    """

    kind = "learned"
    options_key = LEARNED_SPARSE_OPTIONS_KEY
    pending = False  # a model's vectors: nothing to fix from the corpus

    def __init__(
        self, model: SparseEmbedder, cache: EmbeddingCache | None = None, *, source: str = SPARSE_MODEL
    ) -> None:
        if source not in (OWN_HEAD, SPARSE_MODEL):
            raise InvalidInputError(f"source must be {OWN_HEAD!r} or {SPARSE_MODEL!r}, not {source!r}")
        self.model = model
        self.source = source
        self.facts = model.facts
        self.run_identity = f"learned:{self.facts.model_identity}"
        self.document_params = PoolingParams(input_type="document")
        self.documents = CachedSparseVectors(self.facts, self.document_params, self._computed, cache)
        self.truncated = 0  # chunks longer than the sparse model reads: their vectors miss their end

    def _computed(self, texts: list[str]) -> list[SparseVector]:
        """The model's document vectors, warning when a chunk was cut to the sparse model's length:
        chunks are sized for the dense model, and a sparse model with a shorter window (or another
        tokenizer) would otherwise silently leave the terms of a chunk's end out of its vector."""
        outputs = self.model.encode(texts, "sparse_embed", self.document_params)
        cut = sum(out.truncated for out in outputs)
        if cut:
            if not self.truncated:
                logger.warning(
                    "chunks longer than the sparse model %s reads (%d tokens) were cut to fit: their "
                    "sparse vectors leave out the chunk's end (%d in this batch); use a smaller "
                    "--chunk-tokens",
                    self.facts.model_name,
                    self.facts.max_model_len,
                    cut,
                )
            self.truncated += cut
        return [SparseVector(out.outputs.data["index"], out.outputs.data["value"]) for out in outputs]

    @property
    def computed(self) -> int:
        return self.documents.misses

    def settings(self) -> dict[str, Any]:
        return {
            "model_identity": self.facts.model_identity,
            "model_name": self.facts.model_name,
            "source": self.source,
        }

    def adopt(self, recorded: dict[str, Any] | None, first_batch: Sequence[str]) -> None:
        """Refuse a collection whose sparse vectors another model made (nothing else to fix)."""
        if recorded:
            check_learned_sparse_identity(recorded, self.facts)

    def encode(self, texts: Sequence[str]) -> list[SparseVector]:
        return self.documents.vectors(texts)

    def encode_queries(self, texts: Sequence[str]) -> list[SparseVector]:
        """The same model's query-side vectors (``input_type="query"``, for models with query prompts)."""
        return self.model.sparse_embed(list(texts), PoolingParams(input_type="query"))


def check_learned_sparse_identity(recorded: object, facts: ModelFacts) -> None:
    """Raise :class:`CollectionMismatchError` unless ``recorded`` (a collection's learned-sparse record,
    read as data) names the weights of ``facts``'s model."""
    record = recorded if isinstance(recorded, dict) else {}
    identity = record.get("model_identity")
    if not isinstance(identity, str):
        raise CollectionMismatchError("the collection's learned sparse record names no model")
    if not same_weights(identity, facts.model_identity):
        name = record.get("model_name", identity)
        raise CollectionMismatchError(
            f"the collection's sparse vectors were made by {name!r} (fingerprint "
            f"{weights_fingerprint(identity)}), but {facts.model_name!r} has fingerprint "
            f"{weights_fingerprint(facts.model_identity)}"
        )


def learned_sparse_for_search(
    recorded: object, main: SparseEmbedder | Any, named: SparseEmbedder | None = None
) -> LearnedSparseChunkEncoder:
    """The query side of a ``learned`` collection: the sparse model named by the user, else the main
    model when it has a sparse head, checked against the model the collection recorded (``recorded``
    is data: it names a model, it never loads one)."""
    if named is not None:
        model, source = named, SPARSE_MODEL
    elif "sparse_embed" in getattr(main, "supported_tasks", ()):
        model, source = main, OWN_HEAD
    else:
        # The record is data: the suggestion names the flag, never a path or name read from it.
        raise InvalidInputError(
            "the collection's sparse vectors were made by a separate sparse model and this model has "
            "no sparse head: pass --sparse-model with the model the collection was ingested with"
        )
    check_learned_sparse_identity(recorded, model.facts)
    return LearnedSparseChunkEncoder(model, source=source)
