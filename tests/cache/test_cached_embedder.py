"""CachedEmbedder: a PoolingBackend behind the cache, as ingestion, retrieval and the adapters use it.

(The same cases against the HTTP client are in tests/backend/test_conformance.py.)"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from poolrag import (
    DimensionsError,
    Engine,
    InputTypeError,
    InvalidInputError,
    PoolingParams,
    UnsupportedTaskError,
)
from poolrag.backend import PoolingBackend
from poolrag.cache import CachedEmbedder, EmbeddingCache

TEXTS = ["The cat sat on the mat.", "Quantum computers use qubits.", "Bread rises because of yeast."]


def test_first_call_computes_second_call_reads_the_cache(tmp_path: Path, minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    expected = minilm_engine.embed_array(TEXTS, PoolingParams(input_type="document"))
    first = embedder.embed_documents(TEXTS)
    assert (embedder.hits, embedder.misses) == (0, 3)
    second = embedder.embed_documents(TEXTS)
    assert (embedder.hits, embedder.misses) == (3, 3)
    np.testing.assert_allclose(first, expected, atol=1e-6)
    assert np.array_equal(first, second)


def test_cache_is_shared_between_embedders_and_processes_via_the_file(tmp_path: Path, minilm_engine) -> None:
    CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite")).embed_documents(TEXTS)
    fresh = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    fresh.embed_documents(TEXTS[::-1])
    assert (fresh.hits, fresh.misses) == (3, 0)


def test_the_same_weights_share_entries_whatever_the_model_is_called(
    tmp_path: Path, minilm_engine, minilm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``./m``, ``m/``, an absolute path and a copy elsewhere each started from an empty cache:
    the key held the name the model was given, which a served name or another venv changes too."""
    CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite")).embed_documents(TEXTS)
    copy = tmp_path / "elsewhere" / "renamed-model"
    shutil.copytree(minilm_path, copy)
    monkeypatch.chdir(copy.parent)
    for spelling in ("./renamed-model", "renamed-model/", str(copy)):
        engine = Engine(spelling)
        assert engine.model_identity != minilm_engine.model_identity  # a name of its own...
        embedder = CachedEmbedder(engine, EmbeddingCache(tmp_path / "c.sqlite"))
        embedder.embed_documents(TEXTS)
        assert (embedder.hits, embedder.misses) == (3, 0)  # ...and the same entries


def test_only_missing_texts_reach_the_model_and_order_is_kept(tmp_path: Path, minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    embedder.embed_documents(TEXTS[:2])
    mixed = embedder.embed_documents([TEXTS[2], TEXTS[0], TEXTS[2]])
    assert embedder.misses == 3  # 2 before + TEXTS[2] once (its duplicate is reused)
    expected = minilm_engine.embed_array([TEXTS[2], TEXTS[0], TEXTS[2]], PoolingParams(input_type="document"))
    np.testing.assert_allclose(mixed, expected, atol=1e-6)


def test_queries_and_documents_are_cached_apart(tmp_path: Path, minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    embedder.embed_documents(TEXTS[:1])
    query = embedder.embed_query(TEXTS[0])
    assert embedder.misses == 2 and query.shape == (384,)


def test_asking_for_the_models_own_normalisation_reads_the_same_entries(
    tmp_path: Path, minilm_engine
) -> None:
    """MiniLM normalises: ``normalize=True`` gives the same vectors as unset, so the same cache
    entries; ``normalize=False`` gives other vectors, so other entries."""
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    unset = CachedEmbedder(minilm_engine, cache).embed_documents(TEXTS)
    asked = CachedEmbedder(minilm_engine, cache, pooling_params=PoolingParams(normalize=True))
    np.testing.assert_array_equal(asked.embed_documents(TEXTS), unset)
    assert asked.misses == 0 and asked.hits == len(TEXTS)
    raw = CachedEmbedder(minilm_engine, cache, pooling_params=PoolingParams(normalize=False))
    raw.embed_documents(TEXTS)
    assert raw.misses == len(TEXTS)


def test_a_corrupt_entry_is_recomputed_to_the_same_vector(tmp_path: Path, minilm_engine) -> None:
    path = tmp_path / "c.sqlite"
    cache = EmbeddingCache(path)
    embedder = CachedEmbedder(minilm_engine, cache)
    original = embedder.embed_documents(TEXTS)
    with sqlite3.connect(path) as conn:
        (key, data) = conn.execute("SELECT key, data FROM vectors LIMIT 1").fetchone()
        conn.execute("UPDATE vectors SET data = ? WHERE key = ?", (data[:-4] + b"\x00\x00\x80\x7f", key))
    again = embedder.embed_documents(TEXTS)
    assert cache.stats.corrupt == 1 and embedder.misses == 4
    np.testing.assert_allclose(again, original, atol=1e-6)
    assert embedder.embed_documents(TEXTS).shape == (3, 384) and embedder.misses == 4  # repaired


def test_full_vectors_serve_every_matryoshka_size_without_recomputing(
    tmp_path: Path, matryoshka_minilm
) -> None:
    embedder = CachedEmbedder(matryoshka_minilm, EmbeddingCache(tmp_path / "c.sqlite"))
    full = embedder.embed_documents(TEXTS)
    for dims in (256, 64, 32):
        small = embedder.embed_documents(TEXTS, dimensions=dims)
        direct = matryoshka_minilm.embed_array(TEXTS, PoolingParams(dimensions=dims, input_type="document"))
        assert small.shape == (3, dims)
        np.testing.assert_allclose(small, direct, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-5)
    assert embedder.misses == 3
    np.testing.assert_allclose(
        full[:, :64] / np.linalg.norm(full[:, :64], axis=1, keepdims=True),
        embedder.embed_documents(TEXTS, dimensions=64),
        atol=1e-6,
    )


@pytest.mark.parametrize("chunked", [False, True])
def test_a_size_cut_from_a_cached_full_vector_is_the_engines_byte_for_byte(
    tmp_path: Path, minilm_path: Path, chunked: bool
) -> None:
    """The engine cuts a smaller size from its full vector as the cache does, so ``ingest --dimensions``
    (through the cache) stores the bytes the server sends for that size: a float32 rounding apart, a
    value at a uint8 bucket's edge falls into the next bucket."""
    options = {"enable_chunked_processing": True, "max_embed_len": 2048} if chunked else None
    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True}, pooler_config=options)
    texts = [*TEXTS, "retrieval " * 600] if chunked else TEXTS  # 600 words: three of MiniLM's windows
    embedder = CachedEmbedder(engine, EmbeddingCache(tmp_path / "c.sqlite"))
    embedder.embed_documents(texts)
    for dims in (256, 100, 64, 32):
        direct = engine.embed_array(texts, PoolingParams(dimensions=dims, input_type="document"))
        assert np.array_equal(embedder.embed_documents(texts, dimensions=dims), direct), dims
        alone = engine.embed_array(texts[-1:], PoolingParams(dimensions=dims, input_type="document"))
        assert np.array_equal(alone, direct[-1:]), dims  # a batch of one cuts as a batch of many
    assert embedder.misses == len(texts)


def test_an_override_changes_the_cache_namespace_a_matryoshka_declaration_does_not(
    tmp_path: Path, minilm_engine, matryoshka_minilm, minilm_path: Path
) -> None:
    """is_matryoshka says which sizes may be cut, not what the full vector is: its full vectors
    come from the cache another run filled; an override of the model itself gets keys of its own."""
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    CachedEmbedder(minilm_engine, cache).embed_documents(TEXTS[:1])
    declared = CachedEmbedder(matryoshka_minilm, cache)
    declared.embed_documents(TEXTS[:1])
    assert declared.misses == 0
    changed = CachedEmbedder(Engine(str(minilm_path), hf_overrides={"layer_norm_eps": 1e-3}), cache)
    changed.embed_documents(TEXTS[:1])
    assert changed.misses == 1


def test_truncating_a_non_matryoshka_model_is_refused_before_any_work(tmp_path: Path, minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    with pytest.raises(DimensionsError, match="not a Matryoshka model"):
        embedder.embed_documents(TEXTS, dimensions=64)
    with pytest.raises(DimensionsError, match="between 1 and 384"):
        embedder.embed_documents(TEXTS, dimensions=385)
    assert embedder.misses == 0
    assert embedder.embed_documents(TEXTS[:1], dimensions=384).shape == (1, 384)  # full size is fine


def test_bad_inputs_are_rejected_clearly(minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine)
    with pytest.raises(InputTypeError):
        embedder.embed_documents("not a list")  # type: ignore[arg-type]
    with pytest.raises(InputTypeError):
        embedder.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="empty"):
        embedder.embed_documents(["   "])
    with pytest.raises(InputTypeError):
        embedder.embed_query(None)  # type: ignore[arg-type]
    assert embedder.embed_documents([]).shape == (0, 384)


def test_async_variants_match_the_sync_ones(tmp_path: Path, minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))

    async def both() -> tuple[np.ndarray, np.ndarray]:
        return await embedder.aembed_documents(TEXTS), await embedder.aembed_query(TEXTS[0])

    docs, query = asyncio.run(both())
    np.testing.assert_allclose(docs, embedder.embed_documents(TEXTS), atol=1e-6)
    np.testing.assert_allclose(query, embedder.embed_query(TEXTS[0]), atol=1e-6)
    assert embedder.misses == 4 and embedder.hits == 4


def test_it_is_a_pooling_backend_with_its_backends_facts(minilm_engine) -> None:
    embedder = CachedEmbedder(minilm_engine)
    assert isinstance(embedder, PoolingBackend) and embedder.facts == minilm_engine.facts
    np.testing.assert_allclose(
        embedder.score_array(TEXTS[0], TEXTS), minilm_engine.score_array(TEXTS[0], TEXTS), atol=1e-6
    )


def test_a_model_that_cannot_embed_is_refused(tiny_model) -> None:
    with pytest.raises(UnsupportedTaskError):
        CachedEmbedder(Engine(tiny_model("bert", head="sequence", num_labels=1)))


def test_pooler_settings_that_change_vectors_change_the_cache_namespace(
    tmp_path: Path, minilm_path: Path, minilm_engine
) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    CachedEmbedder(minilm_engine, cache).embed_documents(TEXTS)
    raw = Engine(minilm_path, pooler_config={"normalize": False})  # same weights, other vectors
    assert raw.facts.model_identity == minilm_engine.facts.model_identity
    embedder = CachedEmbedder(raw, cache)
    got = embedder.embed_documents(TEXTS)
    assert embedder.misses == 3  # nothing taken from the normalised entries
    np.testing.assert_allclose(got, raw.embed_array(TEXTS, PoolingParams(input_type="document")), atol=1e-6)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)


def test_the_backends_default_dimensions_are_honoured_from_full_cached_vectors(
    tmp_path: Path, minilm_path: Path
) -> None:
    engine = Engine(minilm_path, hf_overrides={"is_matryoshka": True}, pooler_config={"dimensions": 128})
    embedder = CachedEmbedder(engine, EmbeddingCache(tmp_path / "c.sqlite"))
    default = embedder.embed_array(TEXTS)
    assert default.shape == (3, 128)
    np.testing.assert_allclose(default, engine.embed_array(TEXTS), atol=1e-6)
    full = embedder.embed_array(TEXTS, PoolingParams(dimensions=384))  # from the same cached vectors
    np.testing.assert_allclose(full, engine.embed_array(TEXTS, PoolingParams(dimensions=384)), atol=1e-6)
    assert embedder.misses == 3


def test_call_parameters_override_the_embedders_own_field_by_field(tmp_path: Path, minilm_engine) -> None:
    base = PoolingParams(input_type="query", truncate_prompt_tokens=-1)
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"), pooling_params=base)
    np.testing.assert_allclose(embedder.embed_array(TEXTS), minilm_engine.embed_array(TEXTS, base), atol=1e-6)
    documents = embedder.embed_array(TEXTS, PoolingParams(input_type="document"))
    expected = minilm_engine.embed_array(TEXTS, base.with_updates(input_type="document"))
    np.testing.assert_allclose(documents, expected, atol=1e-6)
    assert embedder.misses == 6  # queries and documents are cached apart


def test_a_calls_prompt_or_prompt_name_replaces_the_embedders_instruction(
    minilm_path: Path, tmp_path: Path
) -> None:
    """An embedder made with a ``prompt`` and a call naming a ``prompt_name`` (or the other way round):
    the call's instruction is the one used, as a call's parameters override the embedder's."""
    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "prompted"
    SentenceTransformer(str(minilm_path), device="cpu", prompts={"query": "query: "}).save(str(folder))
    engine = Engine(folder)
    embedder = CachedEmbedder(engine, pooling_params=PoolingParams(prompt="q: "))
    named = embedder.embed_array(TEXTS[:1], PoolingParams(prompt_name="query"))
    np.testing.assert_allclose(named, engine.embed_array(["query: " + TEXTS[0]]), atol=1e-6)
    back = CachedEmbedder(engine, pooling_params=PoolingParams(prompt_name="query"))
    explicit = back.embed_array(TEXTS[:1], PoolingParams(prompt="passage: "))
    np.testing.assert_allclose(explicit, engine.embed_array(["passage: " + TEXTS[0]]), atol=1e-6)


def test_a_cache_may_be_given_as_its_files_path(tmp_path: Path, minilm_engine) -> None:
    """The adapters took ``cache="path"``; CachedEmbedder took it too and failed on first use."""
    CachedEmbedder(minilm_engine, tmp_path / "c.sqlite").embed_documents(TEXTS)
    again = CachedEmbedder(minilm_engine, str(tmp_path / "c.sqlite"))
    again.embed_documents(TEXTS)
    assert (again.hits, again.misses) == (3, 0)
    with pytest.raises(InputTypeError, match="cache must be an EmbeddingCache or a file path, not dict"):
        CachedEmbedder(minilm_engine, {})  # type: ignore[arg-type]


def test_an_engine_that_refuses_long_inputs_is_not_served_a_vector_another_one_cut(
    tmp_path: Path, minilm_engine, minilm_path: Path
) -> None:
    """``Engine(truncate=False)`` refuses an over-long input; behind the cache it still does, rather
    than get the vector a truncating engine cached for the same text (the length rule is in the key)."""
    from poolrag import InputTooLongError

    long_text = "word " * 1000
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    CachedEmbedder(minilm_engine, cache).embed_documents([long_text])  # cut, and cached
    refusing = Engine(minilm_path, truncate=False)
    with pytest.raises(InputTooLongError):
        refusing.embed_array([long_text])
    with pytest.raises(InputTooLongError):
        CachedEmbedder(refusing, cache).embed_documents([long_text])
    short = CachedEmbedder(refusing, cache).embed_documents(TEXTS)  # what fits is read alike
    np.testing.assert_allclose(short, CachedEmbedder(minilm_engine, cache).embed_documents(TEXTS), atol=1e-6)


def _refusal(call) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as caught:
        call()
    return caught.value


def test_a_refused_text_is_named_where_the_callers_list_has_it(tmp_path: Path, minilm_engine) -> None:
    """Only the cache's misses reach the engine, so its error names their place among the misses;
    the caller is told its own index, in the engine's words, sync and async."""
    refuse = PoolingParams(truncate=False)
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"), pooling_params=refuse)
    embedder.embed_array(TEXTS[:2])
    for bad in ("word " * 1000, "   "):  # too long (the engine's refusal), empty (the cache's check)
        texts = [*TEXTS[:2], "Fresh text.", bad]
        expected = _refusal(lambda texts=texts: minilm_engine.embed_array(texts, refuse))
        for call in (
            lambda texts=texts: embedder.embed_array(texts),
            lambda texts=texts: asyncio.run(embedder.aembed_array(texts)),
        ):
            error = _refusal(call)
            assert str(error).startswith("input[3]") and str(error) == str(expected)
            assert type(error) is type(expected) and error.index == expected.index == 3


def test_a_refused_late_chunk_span_is_named_as_the_caller_gave_it(tmp_path: Path, minilm_engine) -> None:
    document = "The cat sat on the mat.    Bread rises because of yeast."
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite"))
    embedder.embed_chunks(document, [(0, 23)])
    spans = [(0, 23), (23, 27)]  # the second is only spaces
    expected = _refusal(lambda: minilm_engine.embed_chunks(document, spans))
    assert str(_refusal(lambda: embedder.embed_chunks(document, spans))) == str(expected)
    assert str(expected).startswith("spans[1]")
    shown = _refusal(lambda: embedder.embed_chunks(document, [(0, 23), (5, 99)]))
    assert str(shown).startswith("spans[1] = [5, 99] is outside the document")


def test_late_vectors_are_the_same_whatever_the_cache_held_before(tmp_path: Path, minilm_path: Path) -> None:
    """Overlapping spans past the model's window: the spans already cached are not sent again, and a
    straddling chunk used to read another chunk's centred window only when both were sent together,
    so the cache's answer hung on what it held before (one vector off by 0.026)."""
    engine = Engine(minilm_path, max_model_len=32)
    document = " ".join(f"Sentence {n} of a long document tells its own small story." for n in range(12))
    spans = [(s, s + 60) for s in range(0, len(document) - 60, 25)]
    fresh = engine.embed_chunks(document, spans)
    embedder = CachedEmbedder(engine, EmbeddingCache(tmp_path / "c.sqlite"))
    embedder.embed_chunks(document, spans[::2])  # half the spans cached by an earlier call
    np.testing.assert_allclose(embedder.embed_chunks(document, spans), fresh, atol=1e-6)
    assert embedder.hits == len(spans[::2])


def test_a_cached_embedder_pickles_as_its_backend_and_its_file(tmp_path: Path, minilm_engine) -> None:
    """A framework's embedding class holding one is pickled (LangChain's, a worker pool's task):
    the copy opens the same file, with the same bound, and reads what the original stored."""
    import pickle

    cached = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "c.sqlite", max_bytes=10**7))
    want = cached.embed_array(["a tide table", "the moon"])
    copy = pickle.loads(pickle.dumps(cached))
    assert copy.cache.path == cached.cache.path and copy.cache.max_bytes == 10**7
    hits, misses = copy.hits, copy.misses
    np.testing.assert_array_equal(copy.embed_array(["a tide table", "the moon"]), want)
    assert (copy.hits - hits, copy.misses - misses) == (2, 0)
