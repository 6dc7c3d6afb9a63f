"""Collections that store float16 or uint8 vectors: the database holds exactly what the server sends
for that type, search still finds the right chunk with cosine-like scores, and a store that cannot
hold the type refuses it before anything is created."""

from __future__ import annotations

import dataclasses
import itertools
import uuid

import numpy as np
import pytest
from stores_support import SENTENCES

from poolrag import quantize_vectors
from poolrag.errors import InvalidInputError
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.stores import ChunkRecord, CollectionMismatchError, CollectionSpec
from poolrag.stores.vector_types import StoredVectors
from poolrag.testing.store_internals import raw_dense_vectors

COMPACT_KINDS = ["qdrant", "qdrant-edge", "memory"]


def _ranges(vectors: np.ndarray) -> QuantizationRanges:
    """Ranges measured on other texts than the ones stored, as a calibration file would be."""
    rng = np.random.default_rng(0)
    noisy = vectors + rng.normal(scale=0.05, size=vectors.shape).astype(np.float32)
    return QuantizationRanges.from_vectors({vectors.shape[1]: np.vstack([vectors, noisy])})


def _spec(vectors: np.ndarray, vector_type: str, ranges: QuantizationRanges | None = None) -> CollectionSpec:
    width = vectors.shape[1]
    return CollectionSpec(
        name="docs",
        dimension=width,
        model_identity="minilm@abc",
        full_dimension=width,
        vector_type=vector_type,  # type: ignore[arg-type]
        vector_ranges=ranges.for_width(width).tolist() if ranges is not None else None,
    )


def _fill(store, vectors: np.ndarray, spec: CollectionSpec) -> list[str]:
    store.ensure_collection(spec)
    ids = [str(uuid.UUID(int=i + 1)) for i in range(len(vectors))]
    store.upsert([ChunkRecord(i, v, {"text": t}) for i, v, t in zip(ids, vectors, SENTENCES, strict=True)])
    return ids


@pytest.mark.parametrize("kind", COMPACT_KINDS)
def test_a_float16_collection_holds_the_servers_float16_values(kind, make_store, sentence_vectors) -> None:
    store = make_store(kind)
    ids = _fill(store, sentence_vectors, _spec(sentence_vectors, "float16"))
    raw = raw_dense_vectors(store, ids)
    # what /v1/embeddings sends for embed_dtype=float16, widened back: exactly representable
    np.testing.assert_allclose(raw, sentence_vectors.astype(np.float16).astype(np.float32), atol=1e-7)
    for i, vector in enumerate(sentence_vectors):
        hits = store.search(vector, 2)
        assert hits[0].id == ids[i]
        assert hits[0].score == pytest.approx(1.0, abs=2e-3)


@pytest.mark.parametrize("kind", COMPACT_KINDS)
def test_a_uint8_collection_holds_the_servers_uint8_bytes(kind, make_store, sentence_vectors) -> None:
    ranges = _ranges(sentence_vectors)
    store = make_store(kind)
    ids = _fill(store, sentence_vectors, _spec(sentence_vectors, "uint8", ranges))
    raw = raw_dense_vectors(store, ids)
    np.testing.assert_array_equal(raw, quantize_vectors(sentence_vectors, "uint8", ranges=ranges))
    assert raw.min() >= 0 and raw.max() <= 255 and np.array_equal(raw, np.round(raw))


@pytest.mark.parametrize("kind", COMPACT_KINDS)
def test_uint8_search_ranks_as_float_search_does_within_a_buckets_error(
    kind, make_store, sentence_vectors
) -> None:
    store = make_store(kind)
    ids = _fill(store, sentence_vectors, _spec(sentence_vectors, "uint8", _ranges(sentence_vectors)))
    cosine = sentence_vectors @ sentence_vectors.T
    for i, query in enumerate(sentence_vectors):
        hits = store.search(query, len(ids))
        assert hits[0].id == ids[i] and len(hits) == len(ids)
        order = [ids.index(h.id) for h in hits]  # swapped only where cosines are within the error
        assert all(cosine[i, a] >= cosine[i, b] - 0.04 for a, b in itertools.pairwise(order))
        by_id = {h.id: h.score for h in hits}
        for j, chunk in enumerate(ids):  # half a bucket per dimension, summed over 384 of them
            assert by_id[chunk] == pytest.approx(cosine[i, j], abs=0.02)
        assert hits[0].payload["text"] == SENTENCES[i]


@pytest.mark.parametrize("kind", COMPACT_KINDS)
def test_fetched_uint8_vectors_are_their_bucket_centres(kind, make_store, sentence_vectors) -> None:
    ranges = _ranges(sentence_vectors)
    store = make_store(kind)
    ids = _fill(store, sentence_vectors, _spec(sentence_vectors, "uint8", ranges))
    fetched = store.fetch_vectors(ids)
    step = (ranges.for_width(384)[1] - ranges.for_width(384)[0]) / 255
    for i, chunk in enumerate(ids):
        assert fetched[chunk].dtype == np.float32
        assert (np.abs(fetched[chunk] - sentence_vectors[i]) <= step / 2 + 1e-6).all()


@pytest.mark.parametrize("kind", ["qdrant", "qdrant-edge"])
def test_the_type_and_its_ranges_survive_reopening_and_other_ranges_are_refused(
    kind, make_store, sentence_vectors, tmp_path
) -> None:
    ranges = _ranges(sentence_vectors)
    spec = _spec(sentence_vectors, "uint8", ranges)
    first = make_store(kind, root=tmp_path)
    _fill(first, sentence_vectors, spec)
    first.close()
    again = make_store(kind, root=tmp_path)
    stored = again.read_spec()
    assert stored.vector_type == "uint8"
    np.testing.assert_array_equal(np.asarray(stored.vector_ranges), ranges.for_width(384))
    other = QuantizationRanges.from_vectors({384: sentence_vectors})
    with pytest.raises(CollectionMismatchError, match="other ranges"):
        again.ensure_collection(_spec(sentence_vectors, "uint8", other))
    with pytest.raises(CollectionMismatchError, match="uint8 vectors vs float16"):
        again.ensure_collection(_spec(sentence_vectors, "float16"))


@pytest.mark.parametrize("vector_type", ["float16", "uint8"])
def test_milvus_refuses_compact_vectors_before_creating_anything(
    vector_type, make_store, sentence_vectors
) -> None:
    store = make_store("milvus")
    ranges = _ranges(sentence_vectors) if vector_type == "uint8" else None
    with pytest.raises(InvalidInputError, match=f"milvus stores float32 vectors, not {vector_type}.*qdrant"):
        store.ensure_collection(_spec(sentence_vectors, vector_type, ranges))
    assert store.read_spec() is None


@pytest.mark.parametrize("kind", COMPACT_KINDS)
def test_a_binary_index_over_uint8_vectors_is_refused_before_anything_is_created(
    kind, make_store, sentence_vectors
) -> None:
    # a binary index keeps each value's sign bit, and a uint8 value is never negative: every vector
    # got the same code, and the first stage picked its candidates blind (recall@10 0.13 against 0.59
    # without the index, 20,000 clustered vectors on qdrant-edge)
    spec = _spec(sentence_vectors, "uint8", _ranges(sentence_vectors))
    store = make_store(kind)
    with pytest.raises(InvalidInputError, match=r"binary index.*uint8.*never negative.*int8"):
        store.ensure_collection(dataclasses.replace(spec, quantization="binary"))
    assert store.read_spec() is None
    assert store.ensure_collection(dataclasses.replace(spec, quantization="int8")).quantization == "int8"


def test_a_uint8_spec_without_ranges_or_of_the_wrong_width_is_refused(sentence_vectors) -> None:
    with pytest.raises(InvalidInputError, match=r"shape \(2, 384\)"):
        _spec(sentence_vectors, "uint8")
    with pytest.raises(InvalidInputError, match=r"shape \(2, 384\)"):
        CollectionSpec("docs", 384, "m@x", 384, vector_type="uint8", vector_ranges=[[0.0] * 10, [1.0] * 10])
    with pytest.raises(InvalidInputError, match="vector type must be one of float32, float16, uint8"):
        CollectionSpec("docs", 384, "m@x", 384, vector_type="int8")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="ColBERT token vectors stay float32"):
        CollectionSpec("docs", 8, "m@x", 8, layout="multivector", vector_type="float16")


def test_the_uint8_first_stage_query_ranks_rows_of_equal_value_sums_exactly() -> None:
    """The database's uint8 query is the float query raised by one amount in every dimension, times
    each dimension's bucket step, mapped onto 0..255: its only bias is a row's sum of values, so
    among rows with one sum of values it ranks as the float query against the bucket centres, even
    where dimensions have different steps and the rows different bucket sums."""
    rng = np.random.default_rng(1)
    half = 32
    steps = np.repeat([0.002, 0.004], half).astype(np.float32)  # two bucket widths
    low = rng.uniform(-0.3, -0.1, 2 * half).astype(np.float32)
    ranges = np.vstack([low, low + 255 * steps])
    codec = StoredVectors("uint8", ranges)
    base = rng.integers(50, 200, 2 * half)
    rows = []
    for _ in range(200):
        # 2u buckets up in each narrow dimension, u down in each wide one: the same sum of values,
        # a bucket sum that differs from row to row
        u = int(rng.integers(-20, 21))
        rows.append(np.concatenate([rng.permutation(base[:half] + 2 * u), rng.permutation(base[half:] - u)]))
    rows = np.array(rows, dtype=np.uint8)
    assert np.ptp(codec.decode(rows).sum(axis=1)) < 1e-3 and np.ptp(rows.sum(axis=1, dtype=np.int64)) > 600
    query = rng.normal(size=2 * half).astype(np.float32)
    first = codec.first_stage_query(query)
    assert first.min() == 0 and first.max() == 255 and np.array_equal(first, np.round(first))
    exact = codec.decode(rows) @ query
    ranked = rows.astype(np.float64) @ first
    # the same order wherever the exact scores are further apart than the query's rounding (half a
    # unit per dimension, max((q - min q) ⊙ step) / 255 in exact units) can move them
    weights = (query - query.min()) * steps
    rounding = 0.5 * float(rows.sum(axis=1, dtype=np.int64).max()) * float(weights.max()) / 255
    pairs = [
        (a, b)
        for a, b in itertools.combinations(range(len(rows)), 2)
        if abs(exact[a] - exact[b]) > 2 * rounding
    ]
    assert len(pairs) > 10_000  # most of the 19,900 pairs: the check is not vacuous
    assert all((exact[a] > exact[b]) == (ranked[a] > ranked[b]) for a, b in pairs)


@pytest.mark.parametrize(
    ("vector_type", "bad", "said"),
    [
        ("uint8", np.nan, "not finite"),
        ("float16", np.inf, "not finite"),
        ("float16", 1e6, "beyond float16's range"),
    ],
)
def test_a_vector_the_type_cannot_hold_is_refused_and_nothing_is_written(
    vector_type, bad, said, make_store, sentence_vectors
) -> None:
    store = make_store("qdrant-edge")
    ranges = _ranges(sentence_vectors) if vector_type == "uint8" else None
    _fill(store, sentence_vectors, _spec(sentence_vectors, vector_type, ranges))
    broken = sentence_vectors[2].copy()
    broken[5] = bad
    with pytest.raises(InvalidInputError, match=said):
        store.upsert(
            [
                ChunkRecord(str(uuid.UUID(int=99)), broken, {"text": "x"}),
                ChunkRecord(str(uuid.UUID(int=98)), sentence_vectors[3], {"text": "y"}),
            ]
        )
    assert store.count() == len(sentence_vectors)  # neither record of the refused batch


@pytest.mark.parametrize("kind", COMPACT_KINDS)
@pytest.mark.parametrize("vector_type", ["float16", "uint8"])
def test_vectors_that_are_not_unit_length_are_refused_and_nothing_is_written(
    kind, vector_type, make_store, sentence_vectors
) -> None:
    """A compact collection compares by dot product, the cosine of unit vectors only: vectors of other
    lengths (a model that does not normalise) would rank by length times cosine, where a float32
    collection ranks the same vectors by cosine."""
    store = make_store(kind)
    ranges = _ranges(sentence_vectors) if vector_type == "uint8" else None
    _fill(store, sentence_vectors, _spec(sentence_vectors, vector_type, ranges))
    longer = sentence_vectors[2] * 1.5
    with pytest.raises(InvalidInputError, match=r"vector 1 has length 1\.5: normalise them") as refused:
        store.upsert(
            [
                ChunkRecord(str(uuid.UUID(int=98)), sentence_vectors[3], {"text": "y"}),
                ChunkRecord(str(uuid.UUID(int=99)), longer, {"text": "x"}),
            ]
        )
    assert len(str(refused.value).splitlines()) == 1
    assert store.count() == len(sentence_vectors)  # neither record of the refused batch


def test_values_outside_the_uint8_ranges_are_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """A value past its dimension's range is stored as the edge bucket, so its scores are off by more
    than half a bucket: ranges measured on other documents (or on the first of many) are said."""
    rows = np.random.default_rng(3).uniform(-1, 1, (8, 4)).astype(np.float32)
    ranges = np.vstack((rows.min(axis=0), rows.max(axis=0)))
    codec = StoredVectors("uint8", ranges)
    with caplog.at_level("WARNING", logger="poolrag.stores.vector_types"):
        codec.encode(rows)
        assert not caplog.records  # within the ranges: nothing to say
        codec.encode(rows * 2)
        codec.encode(rows * 2)
    (said,) = [r.getMessage() for r in caplog.records]
    assert "fall outside the uint8 ranges and are clipped" in said and "poolrag calibrate" in said


def test_a_value_a_rounding_past_an_edge_is_not_called_clipped(caplog: pytest.LogCaptureFixture) -> None:
    """Ranges ``poolrag calibrate`` measured on the very documents an uint8 ingest then stored were
    said to clip 3.31% of their values: the ingest took the chunks' vectors from the cache, computed
    by an earlier run in other batches, 1.4e-7 away from calibrate's. A value within half a bucket of
    an edge is stored as faithfully as one inside it; only values past that are said."""
    rows = np.random.default_rng(4).uniform(-1, 1, (8, 4)).astype(np.float32)
    ranges = np.vstack((rows.min(axis=0), rows.max(axis=0)))
    nudged = np.where(rows == ranges[1], rows + 1.5e-7, np.where(rows == ranges[0], rows - 1.5e-7, rows))
    nudged = nudged.astype(np.float32)
    assert ((nudged > ranges[1]) | (nudged < ranges[0])).sum() == 2 * rows.shape[1]  # every edge, past it
    codec = StoredVectors("uint8", ranges)
    with caplog.at_level("WARNING", logger="poolrag.stores.vector_types"):
        codec.encode(nudged)
        assert not caplog.records
        codec.encode(rows * 2)  # past the edges by far more than a bucket: still said
    (said,) = [r.getMessage() for r in caplog.records]
    assert "fall outside the uint8 ranges and are clipped" in said


@pytest.mark.parametrize("kind", COMPACT_KINDS)
@pytest.mark.parametrize("vector_type", ["float32", "float16", "uint8"])
def test_a_vector_of_another_width_is_refused_by_name_and_nothing_is_written(
    kind, vector_type, make_store, sentence_vectors
) -> None:
    """A vector of another width than the collection's (another model, another Matryoshka size) is
    one clear error naming the chunk, as a query of another width is, not numpy's broadcast error
    (uint8) or the database client's bare ``Exception``, and no record of its batch is written."""
    store = make_store(kind)
    ranges = _ranges(sentence_vectors) if vector_type == "uint8" else None
    _fill(store, sentence_vectors, _spec(sentence_vectors, vector_type, ranges))
    cut = sentence_vectors[2][:128] / np.linalg.norm(sentence_vectors[2][:128])
    with pytest.raises(
        InvalidInputError,
        match=r"chunk '.*0063': collection 'docs' holds \[dim\] vectors of size 384, got shape \(128,\)",
    ):
        store.upsert(
            [
                ChunkRecord(str(uuid.UUID(int=98)), sentence_vectors[3], {"text": "y"}),
                ChunkRecord(str(uuid.UUID(int=99)), cut, {"text": "x"}),
            ]
        )
    assert store.count() == len(sentence_vectors)  # neither record of the refused batch


@pytest.mark.parametrize("vector_type", ["float16", "uint8"])
def test_already_quantized_codes_are_refused_as_such_and_nothing_is_written(
    vector_type, make_store, sentence_vectors
) -> None:
    """The server's uint8 bytes upserted as if they were embeddings are said to be codes, as
    sentence-transformers' ``quantize_embeddings`` says, not warned of as clipped and then refused
    as 'not unit length: normalise them'."""
    store = make_store("qdrant-edge")
    ranges = _ranges(sentence_vectors)
    _fill(
        store,
        sentence_vectors,
        _spec(sentence_vectors, vector_type, ranges if vector_type == "uint8" else None),
    )
    codes = quantize_vectors(sentence_vectors[:2], "uint8", ranges=ranges)
    with pytest.raises(InvalidInputError, match=r"not uint8 values \(already quantized\?\)"):
        store.upsert([ChunkRecord(str(uuid.UUID(int=90 + i)), c, {"text": "x"}) for i, c in enumerate(codes)])
    assert store.count() == len(sentence_vectors)


@pytest.mark.parametrize("kind", COMPACT_KINDS)
@pytest.mark.parametrize("vector_type", ["float32", "uint8"])
def test_a_query_of_int8_or_uint8_codes_is_refused_as_such(
    kind, vector_type, make_store, sentence_vectors
) -> None:
    """The server's uint8 bytes of a query, searched as if they were its embedding, ranked as floats:
    a chunk's own codes scored about 0.3 against it, and the top 10 held 86% of the float query's
    on 1,229 MiniLM chunks. They are refused by name instead."""
    store = make_store(kind)
    ranges = _ranges(sentence_vectors)
    _fill(
        store,
        sentence_vectors,
        _spec(sentence_vectors, vector_type, ranges if vector_type == "uint8" else None),
    )
    for precision in ("uint8", "int8"):
        codes = quantize_vectors(sentence_vectors[:1], precision, ranges=ranges)[0]
        with pytest.raises(InvalidInputError, match=rf"not {precision} values \(already quantized\?\)"):
            store.search(codes, 3)
