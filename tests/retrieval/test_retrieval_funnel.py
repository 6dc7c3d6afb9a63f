"""The Matryoshka funnel: recall with 64-dim vectors in the database, re-score with full vectors
from the cache. Measured on a labelled corpus this test builds (20 topics x 8 documents).

The model is all-MiniLM-L6-v2 declared Matryoshka via ``hf_overrides``. It was not trained for
truncation, so its 64-dim prefix is a weak first stage; that makes this a test of the mechanism
(the re-scoring stage must recover what full vectors alone find), not of the model.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from poolrag import Engine, PoolingParams
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.errors import InvalidInputError
from poolrag.ingest import Document, IngestPipeline, TokenChunker
from poolrag.ingest.encoders import DenseEncoder
from poolrag.retrieval import Retriever
from poolrag.stores import (
    ChunkRecord,
    CollectionMismatchError,
    CollectionNotFoundError,
    VectorStore,
    open_store,
)

VOCAB = {
    "astronomy": "planet telescope orbit galaxy comet nebula asteroid star",
    "cooking": "recipe oven flour simmer spices knife dough sauce",
    "music": "guitar melody chord drums orchestra rhythm piano concert",
    "medicine": "doctor vaccine fever surgery hospital symptoms antibiotics nurse",
    "finance": "stocks interest loan bank inflation budget mortgage dividend",
    "sports": "goal referee tournament stadium coach penalty league athlete",
    "computing": "software compiler database algorithm server python bug keyboard",
    "ocean": "whale coral tide reef shark wave salt dolphin",
    "gardening": "seeds soil compost tomatoes pruning weeds greenhouse roses",
    "weather": "storm rain forecast thunder humidity hurricane snow wind",
    "history": "empire castle king revolution medieval treaty pharaoh dynasty",
    "travel": "passport airport hotel luggage train tourist visa itinerary",
    "cars": "engine tires brakes gearbox fuel mechanic highway battery",
    "art": "painting canvas sculpture museum brush portrait gallery sketch",
    "pets": "puppy kitten leash veterinarian litter aquarium hamster parrot",
    "law": "court judge lawyer contract verdict lawsuit evidence jury",
    "education": "teacher exam classroom homework university lecture student grades",
    "fashion": "dress fabric designer jacket runway boots silk tailor",
    "farming": "tractor harvest cattle wheat barn irrigation fertilizer orchard",
    "photography": "camera lens shutter aperture tripod exposure photo flash",
}
TEMPLATES = [
    "Yesterday we talked for hours about the {0}, the {1} and the {2}, and briefly about a {3}.",
    "My notes mention a {0} next to a {1}; someone added a remark on the {2} and a {3}.",
    "The report covers the {0} first, then the {1}, and ends with the {2} (plus one {3}).",
    "Nobody expected the {0} to matter, yet the {1} and the {2} did; a {3} came up too.",
]
DOCS_PER_TOPIC = 8
K = 10


def _corpus() -> tuple[list[Document], list[tuple[str, str]]]:
    rng = random.Random(7)
    topics = {t: words.split() for t, words in VOCAB.items()}
    docs, queries = [], []
    for topic, words in topics.items():
        others = [w for t, ws in topics.items() if t != topic for w in ws]
        for n in range(DOCS_PER_TOPIC):
            picked = [*rng.sample(words, 3), rng.choice(others)]
            docs.append(Document(f"{topic}/{n}", rng.choice(TEMPLATES).format(*picked), {"topic": topic}))
        for _ in range(2):
            a, b = rng.sample(words, 2)
            queries.append((topic, f"questions about the {a} and the {b}"))
    return docs, queries


def _recall(retriever: Retriever, queries, **kwargs) -> float:
    total = 0.0
    for topic, query in queries:
        hits = retriever.search(query, K, **kwargs)
        total += sum(h.payload["topic"] == topic for h in hits) / DOCS_PER_TOPIC
    return total / len(queries)


@pytest.fixture(scope="module")
def matryoshka_minilm(minilm_path: Path) -> Engine:
    return Engine(minilm_path, hf_overrides={"is_matryoshka": True})


def test_funnel_with_64_dims_recalls_as_well_as_full_vectors(
    tmp_path: Path, matryoshka_minilm: Engine
) -> None:
    docs, queries = _corpus()
    embedder = CachedEmbedder(matryoshka_minilm, EmbeddingCache(tmp_path / "cache.sqlite"))
    chunker = TokenChunker.for_model(matryoshka_minilm.tokenizer, matryoshka_minilm.facts)
    stores = {}
    for name, dims in (("full", None), ("small", 64)):
        stores[name] = open_store("qdrant", name, path=str(tmp_path / "qdrant"))
        IngestPipeline(
            stores[name], DenseEncoder(embedder, dims), chunker, checkpoint_dir=tmp_path, progress=False
        ).run(docs)
    assert embedder.misses == len(docs)  # the 64-dim collection reused the full vectors in the cache
    assert stores["small"].read_spec().dimension == 64

    misses_before = embedder.misses
    full = _recall(Retriever(stores["full"], embedder), queries)
    small = Retriever(stores["small"], embedder)
    funnel = _recall(small, queries, candidates=5 * K)
    small_only = _recall(small, queries, rescore=False)
    # Only the queries were embedded (once each): re-scoring took the documents' full vectors from the cache.
    assert embedder.misses - misses_before == len(queries)
    print(f"recall@{K}: full {full:.3f}, 64-dim only {small_only:.3f}, funnel 64->full {funnel:.3f}")
    assert full > 0.6  # the task is learnable, so the comparison means something
    assert funnel >= full - 0.01
    assert funnel >= small_only
    for store in stores.values():
        store.close()


def test_a_late_chunked_collection_of_small_vectors_is_not_re_scored_by_chunks_embedded_alone(
    tmp_path: Path, matryoshka_minilm: Engine
) -> None:
    text = "Whales sing long songs across the ocean. They repeat them for hours. Compilers do not sing."
    embedder = CachedEmbedder(matryoshka_minilm, EmbeddingCache(tmp_path / "cache.sqlite"))
    store = open_store("qdrant", "late", path=str(tmp_path / "q"))
    IngestPipeline(
        store,
        DenseEncoder(embedder, 64),
        TokenChunker(matryoshka_minilm.tokenizer, max_tokens=8, overlap=0),
        checkpoint_dir=tmp_path,
        progress=False,
        late_chunking=True,
    ).run([Document("a.md", text)])
    stored = store.fetch_vectors(list(store.list_sources()))
    misses = embedder.misses
    hits = Retriever(store, embedder).search("do whales repeat their songs?", k=3)
    assert embedder.misses == misses + 1  # the query only: no chunk embedded alone
    query = matryoshka_minilm.embed_array(["do whales repeat their songs?"], PoolingParams(dimensions=64))[0]
    assert len(hits) == 3 and all(set(h.stage_scores) == {"recall"} for h in hits)
    for hit in hits:  # the scores are the late vectors' own cosines
        assert hit.score == pytest.approx(float(stored[hit.id] @ query), abs=1e-5)
    store.close()


TWO_DOCS = [
    Document("a.md", "Whales sing long songs across the ocean."),
    Document("b.md", "Compilers turn code into machine instructions."),
]


def _ingest_small(
    store: VectorStore,
    embedder: CachedEmbedder,
    engine: Engine,
    tmp_path: Path,
    docs: list[Document] = TWO_DOCS,
) -> None:
    """``docs`` ingested at 128 of the model's dimensions."""
    IngestPipeline(
        store,
        DenseEncoder(embedder, 128),
        TokenChunker.for_model(engine.tokenizer, engine.facts),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run(docs)


def test_search_results_carry_every_stage_and_source_offsets(
    tmp_path: Path, matryoshka_minilm: Engine
) -> None:
    docs = TWO_DOCS
    embedder = CachedEmbedder(matryoshka_minilm, EmbeddingCache(tmp_path / "cache.sqlite"))
    store = open_store("milvus", "docs", uri=str(tmp_path / "m.db"))
    _ingest_small(store, embedder, matryoshka_minilm, tmp_path)
    hits = Retriever(store, embedder).search("whale songs", k=2)
    assert [h.source for h in hits] == ["a.md", "b.md"]
    assert set(hits[0].stage_scores) == {"recall", "full"} and hits[0].score == hits[0].stage_scores["full"]
    assert (hits[0].start, hits[0].end) == (0, len(docs[0].text)) and hits[0].score > hits[1].score
    assert hits[0].position == {"start": 0, "end": len(docs[0].text), "chunk_index": 0}  # the adapters'
    with pytest.raises(InvalidInputError, match="k must be a positive integer"):
        Retriever(store, embedder).search("x", k=0)
    plain = Retriever(store, matryoshka_minilm)  # any backend: wrapped in a cache-less CachedEmbedder
    assert [(h.id, h.score) for h in plain.search("whale songs", k=2)] == [(h.id, h.score) for h in hits]
    only_b = plain.search("whale songs", k=2, filter={"source": "b.md"})
    assert [h.source for h in only_b] == ["b.md"] and only_b[0].metadata == {"source": "b.md"}
    store.close()


def test_searching_a_missing_collection_or_with_another_model_fails_clearly(
    tmp_path: Path, minilm_engine: Engine, minilm_path: Path
) -> None:
    store = open_store("qdrant", "nothing", path=str(tmp_path / "q"))
    with pytest.raises(CollectionNotFoundError, match="ingest into it first"):
        Retriever(store, CachedEmbedder(minilm_engine))
    embedder = CachedEmbedder(minilm_engine)
    other = open_store("qdrant", "docs", path=str(tmp_path / "q2"))
    IngestPipeline(
        other,
        DenseEncoder(embedder),
        TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts),
        checkpoint_dir=tmp_path,
        progress=False,
    ).run([Document("a", "some text")])
    with pytest.raises(
        CollectionMismatchError, match="search with the model the collection was ingested with"
    ):
        Retriever(other, CachedEmbedder(Engine(str(minilm_path), hf_overrides={"layer_norm_eps": 1e-3})))
    store.close()
    other.close()


def test_a_query_vector_the_caller_made_replaces_the_querys_embedding_and_is_checked(
    tmp_path: Path, matryoshka_minilm: Engine
) -> None:
    docs = [
        Document("a.md", "Whales sing long songs across the ocean."),
        Document("b.md", "Compilers turn code into machine instructions."),
    ]
    embedder = CachedEmbedder(matryoshka_minilm)
    store = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    chunker = TokenChunker.for_model(matryoshka_minilm.tokenizer, matryoshka_minilm.facts)
    IngestPipeline(store, DenseEncoder(embedder, 64), chunker, checkpoint_dir=tmp_path, progress=False).run(
        docs
    )
    retriever = Retriever(store, embedder)
    # the text says whales; the vector (what a HyDE step or a framework computed) says compilers
    compilers = embedder.embed_query("how does a compiler produce machine code?")
    full = retriever.search("whale songs", k=2, query_vector=compilers)
    assert [h.source for h in full] == ["b.md", "a.md"] and set(full[0].stage_scores) == {"recall", "full"}
    expected = retriever.search("how does a compiler produce machine code?", k=2)
    assert [(h.id, h.score) for h in full] == [(h.id, pytest.approx(h.score, abs=1e-6)) for h in expected]
    small = retriever.search("whale songs", k=2, query_vector=compilers[:64].tolist())
    assert [h.source for h in small] == ["b.md", "a.md"] and set(small[0].stage_scores) == {"recall"}
    for bad in (compilers[:100], compilers[None, :], [float("nan")] * 64, "compilers"):
        with pytest.raises(InvalidInputError, match="query_vector must be one finite vector of 64 or 384"):
            retriever.search("whale songs", k=2, query_vector=bad)
    store.close()


def test_a_point_a_framework_added_without_text_keeps_its_recall_score(
    tmp_path: Path, matryoshka_minilm: Engine
) -> None:
    """LlamaIndex's QdrantVectorStore, which docs/integrations.md says reads an ingested collection,
    keeps a node's text in ``_node_content``, not ``text``: after it added a node to a ``--dimensions``
    collection, every search failed with 'input[0] is empty' (the re-score embedded its empty text).
    Such a point keeps its small-vector score; the others are re-scored as before."""
    from qdrant_client import QdrantClient, models

    embedder = CachedEmbedder(matryoshka_minilm, EmbeddingCache(tmp_path / "cache.sqlite"))
    where = str(tmp_path / "qdrant")
    with open_store("qdrant", "docs", path=where) as store:
        _ingest_small(store, embedder, matryoshka_minilm, tmp_path)
    node = "Humpback whales sing songs that travel across the ocean."
    small = matryoshka_minilm.embed([node], PoolingParams(dimensions=128))[0].outputs.embedding
    client = QdrantClient(path=where)
    try:
        payload = {
            "_node_content": f'{{"text": "{node}"}}',
            "_node_type": "TextNode",
            "source": "notes/whales",
        }
        client.upsert(
            "docs",
            [models.PointStruct(id=str(uuid.uuid4()), vector=list(small), payload=payload)],
        )
    finally:
        client.close()
    with open_store("qdrant", "docs", path=where) as store:
        hits = Retriever(store, embedder).search("whale songs", k=3)
    assert sorted(h.source for h in hits) == ["a.md", "b.md", "notes/whales"]
    foreign = next(h for h in hits if h.source == "notes/whales")
    assert set(foreign.stage_scores) == {"recall"} and foreign.score == foreign.stage_scores["recall"] > 0.5
    assert all(set(h.stage_scores) == {"recall", "full"} for h in hits if h is not foreign)


@pytest.mark.parametrize("text", ["\u200b\u200b", "caf\ud800"])
def test_a_point_whose_stored_text_no_model_reads_keeps_its_recall_score(
    tmp_path: Path, matryoshka_minilm: Engine, text: str
) -> None:
    """A point another writer stored with zero-width characters only (a scraped page's ``\\u200b``
    line a splitter's strip() kept) or a lone surrogate passed the re-score's strip() check, and
    every search of the ``--dimensions`` collection failed with 'input[0] is empty', an index into
    the re-score's batch. It keeps its small-vector score, as a point without text does."""
    docs = [Document("a.md", "Whales sing long songs across the ocean.")]
    embedder = CachedEmbedder(matryoshka_minilm, EmbeddingCache(tmp_path / "cache.sqlite"))
    where = str(tmp_path / "qdrant")
    with open_store("qdrant", "docs", path=where) as store:
        _ingest_small(store, embedder, matryoshka_minilm, tmp_path, docs)
        small = matryoshka_minilm.embed(["whale songs"], PoolingParams(dimensions=128))[0].outputs.embedding
        store.upsert([ChunkRecord(str(uuid.uuid4()), small, {"text": text, "source": "scraped.html"})])
        hits = Retriever(store, embedder).search("whale songs", k=2)
    assert sorted(h.source for h in hits) == ["a.md", "scraped.html"]
    foreign = next(h for h in hits if h.source == "scraped.html")
    assert set(foreign.stage_scores) == {"recall"} and foreign.score == foreign.stage_scores["recall"]
