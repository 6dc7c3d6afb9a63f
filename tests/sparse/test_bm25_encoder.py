"""The lexical BM25 encoder on the MiniLM tokenizer: sparse dot products equal the BM25 formula,
with IDF from the kept statistics and with IDF from Qdrant's ``Modifier.IDF``."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.sparse import BM25Encoder, BM25Parameters, BM25Stats, SparseVector

# Case, punctuation and a special token written into the text must not count.
DOCUMENTS = [
    "The cat sat on the mat.",
    "A dog chased the CAT, then the dog slept!",
    "Birds sing; [SEP] the sun rises.",
]
# The same documents as their terms, by hand: each word is one WordPiece of MiniLM's vocabulary.
TERMS = [
    ["the", "cat", "sat", "on", "the", "mat"],
    ["a", "dog", "chased", "the", "cat", "then", "the", "dog", "slept"],
    ["birds", "sing", "the", "sun", "rises"],
]
QUERIES = {
    "cat dog": ["cat", "dog"],
    "The DOG, the dog?": ["the", "dog"],
    "sun mat zebra": ["sun", "mat", "zebra"],
}


def bm25_by_hand(query: list[str], doc: list[str], corpus: list[list[str]], k1: float = 1.2, b: float = 0.75):
    n_docs = len(corpus)
    avgdl = sum(len(d) for d in corpus) / n_docs
    tf = Counter(doc)
    score = 0.0
    for term in set(query):
        df = sum(term in d for d in corpus)
        idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(doc) / avgdl))
    return score


@pytest.fixture(scope="module")
def encoder(minilm_path: Path) -> BM25Encoder:
    return BM25Encoder.from_pretrained(minilm_path)


def test_terms_are_the_tokenizer_ids_without_specials_punctuation_or_case(encoder: BM25Encoder) -> None:
    ids = encoder.tokenizer.convert_tokens_to_ids
    for counts, words in zip(encoder.term_counts(DOCUMENTS), TERMS, strict=True):
        assert counts == dict(Counter(ids(words)))
    kept = BM25Encoder(encoder.tokenizer, drop_punctuation=False).term_counts(["cat, cat! [CLS]"])[0]
    assert kept == {ids("cat"): 2, ids(","): 1, ids("!"): 1}


def test_scores_equal_the_bm25_formula_with_kept_statistics(encoder: BM25Encoder) -> None:
    counts = encoder.term_counts(DOCUMENTS)
    stats = BM25Stats.from_term_counts(counts)
    assert (stats.document_count, stats.total_length) == (3, 20)
    assert stats.avg_doc_length == pytest.approx(20 / 3)
    docs = encoder.document_vectors(counts, stats.avg_doc_length)
    assert docs == encoder.encode_documents(DOCUMENTS, stats.avg_doc_length)
    queries = encoder.encode_queries(list(QUERIES), stats)
    for query, query_terms in zip(queries, QUERIES.values(), strict=True):
        for doc, doc_terms in zip(docs, TERMS, strict=True):
            assert query.dot(doc) == pytest.approx(bm25_by_hand(query_terms, doc_terms, TERMS), rel=1e-5)


def test_other_parameters_follow_the_formula(encoder: BM25Encoder) -> None:
    params = BM25Parameters(k1=2.0, b=0.0)
    custom = BM25Encoder(encoder.tokenizer, params)
    counts = custom.term_counts(DOCUMENTS)
    stats = BM25Stats.from_term_counts(counts)
    docs = custom.document_vectors(counts, stats.avg_doc_length)
    query = custom.encode_queries(["the dog"], stats)[0]
    expected = bm25_by_hand(["the", "dog"], TERMS[1], TERMS, k1=2.0, b=0.0)
    assert query.dot(docs[1]) == pytest.approx(expected, rel=1e-5)


def test_queries_without_statistics_carry_unit_weights(encoder: BM25Encoder) -> None:
    (query,) = encoder.encode_queries(["The DOG, the dog?"])
    ids = encoder.tokenizer.convert_tokens_to_ids
    assert query.to_dict() == {ids("the"): 1.0, ids("dog"): 1.0}


def test_qdrant_idf_modifier_with_term_frequency_vectors_is_bm25(encoder: BM25Encoder) -> None:
    """IDF left to the store: Qdrant's Modifier.IDF on unit-weight queries gives the same scores."""
    from qdrant_client import QdrantClient, models

    counts = encoder.term_counts(DOCUMENTS)
    docs = encoder.document_vectors(counts, BM25Stats.from_term_counts(counts).avg_doc_length)
    client = QdrantClient(":memory:")
    client.create_collection(
        "bm25",
        vectors_config={},
        sparse_vectors_config={"text": models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    sparse_docs = [models.SparseVector(indices=d.indices.tolist(), values=d.values.tolist()) for d in docs]
    points = [models.PointStruct(id=i, vector={"text": d}) for i, d in enumerate(sparse_docs)]
    client.upsert("bm25", points)
    for query, query_terms in zip(encoder.encode_queries(list(QUERIES)), QUERIES.values(), strict=True):
        sparse = models.SparseVector(indices=query.indices.tolist(), values=query.values.tolist())
        hits = client.query_points("bm25", query=sparse, using="text", limit=10).points
        got = {hit.id: hit.score for hit in hits}
        for i, doc_terms in enumerate(TERMS):
            expected = bm25_by_hand(query_terms, doc_terms, TERMS)
            assert got.get(i, 0.0) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_long_texts_count_whole(encoder: BM25Encoder) -> None:
    (counts,) = encoder.term_counts(["cat " * 2000])
    assert counts == {encoder.tokenizer.convert_tokens_to_ids("cat"): 2000}


def test_document_weights_saturate_and_empty_documents_are_empty(encoder: BM25Encoder) -> None:
    k1 = encoder.parameters.k1
    many, empty = encoder.document_vectors([{5: 1000}, {}], avg_doc_length=1000.0)
    assert many.values[0] < k1 + 1
    assert many.values[0] == pytest.approx(1000 * (k1 + 1) / (1000 + k1))
    assert empty == SparseVector.empty()
    assert encoder.encode_documents(["?!", ""], avg_doc_length=0.0) == [SparseVector.empty()] * 2
    with pytest.raises(InvalidInputError, match="average document length > 0"):
        encoder.document_vectors([{5: 1}], avg_doc_length=0.0)
    with pytest.raises(InputTypeError):
        encoder.term_counts([b"bytes"])  # type: ignore[list-item]


def test_statistics_merge_and_serialise(encoder: BM25Encoder) -> None:
    counts = encoder.term_counts(DOCUMENTS)
    whole = BM25Stats.from_term_counts(counts)
    first, rest = BM25Stats.from_term_counts(counts[:1]), BM25Stats.from_term_counts(counts[1:])
    assert first.merged(rest) == whole
    assert BM25Stats.from_json(whole.to_json()) == whole
    assert BM25Stats().avg_doc_length == 0.0
    the = encoder.tokenizer.convert_tokens_to_ids("the")
    assert whole.document_frequency[the] == 3
    assert whole.idf(the) == pytest.approx(math.log(1 + 0.5 / 3.5))


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"format": 2, "document_count": 1, "total_length": 1, "document_frequency": {}}',
        '{"format": 1, "document_count": 1, "total_length": 1}',
        '{"format": 1, "document_count": 1.5, "total_length": 1, "document_frequency": {}}',
        '{"format": 1, "document_count": 1, "total_length": 1, "document_frequency": {"x": 1}}',
        '{"format": 1, "document_count": 1, "total_length": 1, "document_frequency": {"4": 2}}',
        "not json",
    ],
)
def test_bad_statistics_are_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        BM25Stats.from_json(text)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="k1"):
        BM25Parameters(k1=-1.0)
    with pytest.raises(InvalidInputError, match="b must"):
        BM25Parameters(b=1.5)


def test_a_hub_id_finds_the_tokenizer_the_engine_would(encoder: BM25Encoder) -> None:
    """The default model's hub id resolves offline to its installed copy, as for ``Engine``, so the
    hybrid examples that name it run on a machine without the hub."""
    by_id = BM25Encoder.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")
    assert by_id.term_counts(DOCUMENTS) == encoder.term_counts(DOCUMENTS)
    assert by_id.tokenizer.get_vocab() == encoder.tokenizer.get_vocab()


def test_a_model_poolrag_cannot_run_still_lends_its_tokenizer(
    encoder: BM25Encoder, minilm_path: Path, tmp_path: Path
) -> None:
    """BM25 reads only the tokenizer: a folder whose modules include one poolrag would refuse to
    run (a custom module) gives the same terms, from its Transformer module's folder."""
    import json
    import shutil

    folder = shutil.copytree(minilm_path, tmp_path / "custom")
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": len(modules), "name": "9", "path": "9_Custom", "type": "my_package.CustomHead"})
    (folder / "modules.json").write_text(json.dumps(modules))
    assert BM25Encoder.from_pretrained(folder).term_counts(DOCUMENTS) == encoder.term_counts(DOCUMENTS)
