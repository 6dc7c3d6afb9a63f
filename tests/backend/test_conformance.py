"""One set of cases, every PoolingBackend: the in-process Engine, the HTTP client on a live server,
and the embedding cache around each of them; and for the task methods (``embed``, ``classify``,
``score``, ``encode``, ``reward``, ``sparse_embed``, ``tokenize``), every PoolingEngine: the Engine
and the client.

Whatever a consumer (cache, ingestion, retrieval, the adapters) holds, it must get the same facts,
the same arrays and the same errors, sync and async. Each case runs against every backend and
compares with the Engine, the reference. The server serves each model under the engine's own
name (as ``poolrag serve PATH`` does), so even the facts' names agree.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from server.model_folders import build_pylate_colbert

from poolrag import DimensionsError, Engine, InvalidInputError, PoolingParams, UnsupportedTaskError
from poolrag.backend import InProcessEngine, PoolingBackend, PoolingEngine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import PoolragClient
from poolrag.errors import InputTooLongError, InvalidTextError
from poolrag.model_facts import ScoreKind
from poolrag.outputs import SPARSE_ENTRY, ClassificationOutput, EmbeddingOutput, ScoringOutput
from poolrag.testing.live_server import serve
from poolrag.testing.tiny_models import build_bge_m3, build_encoder, write_sentence_transformers

TEXTS = [
    "Mitochondria produce most of the cell's energy.",
    "Paris is the capital of France.",
    "Hi",
    "A longer passage about photosynthesis, chlorophyll and the light reactions in the thylakoids.",
]
QUERY = "Which organelle produces energy in cells?"
KINDS = ("engine", "client", "cached-engine", "cached-client")
DIRECT = ("engine", "client")  # for models that cannot embed, which the cache refuses
MATRYOSHKA_SIZES = [8, 16, 32]


@dataclass
class Served:
    """One model: its engine (the reference), a client of its live server, and each kind of backend."""

    engine: Engine
    client: PoolragClient
    cache_dir: Path
    caches: itertools.count = field(default_factory=itertools.count)

    def make(self, kind: str) -> PoolingBackend:
        if kind == "engine":
            return self.engine
        if kind == "client":
            return self.client
        inner: PoolingBackend = self.engine if kind == "cached-engine" else self.client
        return CachedEmbedder(inner, EmbeddingCache(self.cache_dir / f"{kind}-{next(self.caches)}.sqlite"))

    def direct(self, kind: str) -> PoolingEngine:
        """The engine or the client itself: the two implementations of the task methods."""
        return self.engine if kind == "engine" else self.client


def _served(engine: Engine, cache_dir: Path) -> Iterator[Served]:
    for url in serve(engine, engine.model_name):
        with PoolragClient(url, model=engine.model_name, max_inputs_per_request=3) as client:
            yield Served(engine, client, cache_dir)


@pytest.fixture(scope="module")
def minilm(minilm_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The packaged all-MiniLM-L6-v2: cosine scores, token embeddings, not Matryoshka."""
    yield from _served(minilm_engine, tmp_path_factory.mktemp("minilm-caches"))


@pytest.fixture(scope="module")
def matryoshka(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A tiny normalising embedder with query/document prompts, declared Matryoshka at 8/16/32."""
    folder = build_encoder(tmp_path_factory.mktemp("matryoshka"), "bert", minilm_path)
    write_sentence_transformers(folder, normalize=True, prompts={"query": "query: ", "document": "passage: "})
    engine = Engine(folder, hf_overrides={"matryoshka_dimensions": MATRYOSHKA_SIZES})
    yield from _served(engine, tmp_path_factory.mktemp("matryoshka-caches"))


@pytest.fixture(scope="module")
def cross_encoder(
    tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    engine = Engine(tiny_model("bert", head="sequence", num_labels=1))
    yield from _served(engine, tmp_path_factory.mktemp("cross-encoder-caches"))


@pytest.fixture(scope="module")
def colbert(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    engine = Engine(build_pylate_colbert(tmp_path_factory.mktemp("colbert"), minilm_path))
    yield from _served(engine, tmp_path_factory.mktemp("colbert-caches"))


def _assert_arrays_equal(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert [a.shape for a in got] == [e.shape for e in expected]
    for a, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, e, atol=1e-6)


# -- what every backend is ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", ["minilm", "matryoshka", "cross_encoder", "colbert"])
def test_every_kind_is_a_pooling_backend_with_the_engines_facts(
    request: pytest.FixtureRequest, model: str, kind: str
) -> None:
    served: Served = request.getfixturevalue(model)
    if kind.startswith("cached") and "embed" not in served.engine.facts.supported_tasks:
        with pytest.raises(UnsupportedTaskError):  # the cache caches embeddings; nothing to wrap
            served.make(kind)
        return
    backend = served.make(kind)
    assert isinstance(backend, PoolingBackend)
    assert backend.facts == served.engine.facts


def test_the_facts_say_what_each_model_is(minilm: Served, matryoshka: Served, colbert: Served) -> None:
    assert minilm.engine.facts.score_kind is ScoreKind.COSINE and not minilm.engine.facts.is_matryoshka
    assert matryoshka.engine.facts.matryoshka_dimensions == tuple(MATRYOSHKA_SIZES)
    assert colbert.engine.facts.score_kind is ScoreKind.MAXSIM
    assert minilm.engine.facts.output_fingerprint != colbert.engine.facts.output_fingerprint


# -- embeddings ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", ["minilm", "matryoshka"])
def test_embed_array_equals_the_engine(request: pytest.FixtureRequest, model: str, kind: str) -> None:
    served: Served = request.getfixturevalue(model)
    backend = served.make(kind)
    for params in (
        None,
        PoolingParams(input_type="query"),
        PoolingParams(input_type="document"),
        PoolingParams(truncate_prompt_tokens=-1),
    ):
        expected = served.engine.embed_array(TEXTS, params)
        for _ in range(2):  # the second time a cached backend reads the cache
            got = backend.embed_array(TEXTS, params)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, expected, atol=1e-6)
    assert backend.embed_array([]).shape == served.engine.embed_array([]).shape


@pytest.mark.parametrize("kind", KINDS)
def test_matryoshka_dimensions_truncate_as_the_engine(matryoshka: Served, kind: str) -> None:
    backend = matryoshka.make(kind)
    backend.embed_array(TEXTS)  # a cached backend now holds full vectors and cuts them
    for dims in MATRYOSHKA_SIZES:
        params = PoolingParams(dimensions=dims, input_type="document")
        got = backend.embed_array(TEXTS, params)
        assert got.shape == (len(TEXTS), dims)
        np.testing.assert_allclose(got, matryoshka.engine.embed_array(TEXTS, params), atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_dimensions_are_the_same_dimensions_error(minilm: Served, matryoshka: Served, kind: str) -> None:
    cases = [
        (minilm, 64),  # a plain model cannot be truncated
        (minilm, 385),  # more than the model has
        (matryoshka, 12),  # not a trained size
        (matryoshka, 0),
    ]
    for served, dims in cases:
        backend = served.make(kind)
        for call in (
            lambda b=backend, d=dims: b.embed_array(TEXTS[:1], PoolingParams(dimensions=d)),
            lambda b=backend, d=dims: asyncio.run(b.aembed_array(TEXTS[:1], PoolingParams(dimensions=d))),
        ):
            with pytest.raises(DimensionsError) as error:
                call()
            assert type(error.value) is DimensionsError
    # the full size is always accepted, Matryoshka model or not
    full = minilm.make(kind).embed_array(TEXTS[:1], PoolingParams(dimensions=384))
    np.testing.assert_allclose(full, minilm.engine.embed_array(TEXTS[:1]), atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_and_unsupported_tasks_are_the_same_errors(minilm: Served, kind: str) -> None:
    backend = minilm.make(kind)
    for task, error_class in (("generate", InvalidInputError), ("classify", UnsupportedTaskError)):
        with pytest.raises(error_class) as error:
            backend.encode_arrays(TEXTS[:1], task)
        assert type(error.value) is error_class
        with pytest.raises(error_class) as error:
            asyncio.run(backend.aencode_arrays(TEXTS[:1], task))
        assert type(error.value) is error_class


@pytest.mark.parametrize("kind", KINDS)
def test_empty_input_is_an_invalid_input_error(minilm: Served, kind: str) -> None:
    backend = minilm.make(kind)
    for call in (
        lambda: backend.embed_array(["fine", "   "]),
        lambda: asyncio.run(backend.aembed_array([""])),
        lambda: backend.encode_arrays([""], "token_embed"),
    ):
        # the client refuses it before sending, by the engine's rule
        with pytest.raises(InvalidTextError):
            call()
    with pytest.raises(InvalidInputError):
        backend.score_array(QUERY, [])


@pytest.mark.parametrize("kind", KINDS)
def test_an_over_long_input_not_to_be_cut_is_an_input_too_long_error(minilm: Served, kind: str) -> None:
    """``except InputTooLongError`` (to split a chunk and retry) catches a server's refusal as it
    catches the engine's (a server's was only a RemoteInvalidInputError)."""
    backend = minilm.make(kind)
    with pytest.raises(InputTooLongError, match="more than the model's maximum"):
        backend.embed_array(["word " * 400], PoolingParams(truncate=False))


# -- scores and token vectors ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "kind"),
    [("minilm", kind) for kind in KINDS] + [("cross_encoder", kind) for kind in DIRECT],
)
def test_score_array_equals_the_engine(request: pytest.FixtureRequest, model: str, kind: str) -> None:
    served: Served = request.getfixturevalue(model)
    got = served.make(kind).score_array(QUERY, TEXTS)
    assert got.dtype == np.float64 and got.shape == (len(TEXTS),)
    np.testing.assert_allclose(got, served.engine.score_array(QUERY, TEXTS), atol=1e-6)


@pytest.mark.parametrize(
    ("model", "kind"),
    [("minilm", kind) for kind in KINDS] + [("colbert", kind) for kind in DIRECT],
)
def test_token_embed_equals_the_engine(request: pytest.FixtureRequest, model: str, kind: str) -> None:
    served: Served = request.getfixturevalue(model)
    backend = served.make(kind)
    for params in (None, PoolingParams(input_type="document"), PoolingParams(input_type="query")):
        _assert_arrays_equal(
            backend.encode_arrays(TEXTS, "token_embed", params),
            served.engine.encode_arrays(TEXTS, "token_embed", params),
        )


# -- async twins -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_async_twins_equal_sync(minilm: Served, matryoshka: Served, colbert: Served, kind: str) -> None:
    backend = minilm.make(kind)
    small = matryoshka.make(kind)
    params = PoolingParams(dimensions=16, input_type="query")

    async def run() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
        return await asyncio.gather(
            backend.aembed_array(TEXTS),
            small.aembed_array(TEXTS, params),
            backend.ascore_array(QUERY, TEXTS),
            backend.aencode_arrays(TEXTS, "token_embed"),
        )

    embedded, truncated, scores, tokens = asyncio.run(run())
    np.testing.assert_allclose(embedded, backend.embed_array(TEXTS), atol=1e-6)
    np.testing.assert_allclose(truncated, small.embed_array(TEXTS, params), atol=1e-6)
    np.testing.assert_allclose(scores, backend.score_array(QUERY, TEXTS), atol=1e-6)
    _assert_arrays_equal(tokens, backend.encode_arrays(TEXTS, "token_embed"))
    if kind in DIRECT:
        colbert_backend = colbert.make(kind)
        document = PoolingParams(input_type="document")
        _assert_arrays_equal(
            asyncio.run(colbert_backend.aencode_arrays(TEXTS, "token_embed", document)),
            colbert_backend.encode_arrays(TEXTS, "token_embed", document),
        )
        np.testing.assert_allclose(
            asyncio.run(colbert_backend.ascore_array(QUERY, TEXTS)),
            colbert_backend.score_array(QUERY, TEXTS),
            atol=1e-6,
        )


# -- sparse vectors (encode_arrays with "sparse_embed") ------------------------------------------------
@pytest.fixture(scope="module")
def bge_m3(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A tiny three-head model (dense CLS + sparse + ColBERT heads), the BGE-M3 layout."""
    engine = Engine(build_bge_m3(tmp_path_factory.mktemp("bge-m3"), minilm_path))
    yield from _served(engine, tmp_path_factory.mktemp("bge-m3-caches"))


def _assert_sparse_equal(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert [a.dtype for a in got] == [SPARSE_ENTRY] * len(expected)
    for a, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a["index"], e["index"])
        # float32 survives JSON exactly; batches of other sizes may move the last bit
        np.testing.assert_allclose(a["value"], e["value"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_sparse_embed_equals_the_engine_sync_and_async(bge_m3: Served, kind: str) -> None:
    backend = bge_m3.make(kind)
    assert "sparse_embed" in backend.facts.supported_tasks
    capped = PoolingParams(max_active_dims=2)
    assert any(len(e) > 2 for e in bge_m3.engine.encode_arrays(TEXTS, "sparse_embed"))  # the cap cuts
    for params in (None, capped):
        expected = bge_m3.engine.encode_arrays(TEXTS, "sparse_embed", params)
        results = [asyncio.run(backend.aencode_arrays(TEXTS, "sparse_embed", params))]
        if kind != "engine":  # the engine's sync results are the reference itself
            results.append(backend.encode_arrays(TEXTS, "sparse_embed", params))
        for got in results:
            _assert_sparse_equal(got, expected)
            if params is capped:
                assert all(len(a) <= 2 for a in got)  # each row capped by this backend itself


@pytest.mark.parametrize("kind", KINDS)
def test_sparse_embed_on_a_dense_model_is_the_same_error(minilm: Served, kind: str) -> None:
    backend = minilm.make(kind)
    with pytest.raises(UnsupportedTaskError, match="embed, score, token_embed"):
        backend.encode_arrays(TEXTS, "sparse_embed")
    with pytest.raises(InvalidInputError, match="max_active_dims applies to sparse_embed"):
        backend.encode_arrays(TEXTS, "token_embed", PoolingParams(max_active_dims=3))


def test_the_client_returns_sparse_vectors_as_the_engine(bge_m3: Served) -> None:
    expected = bge_m3.engine.sparse_embed(TEXTS)
    for got in (bge_m3.client.sparse_embed(TEXTS), asyncio.run(bge_m3.client.asparse_embed(TEXTS))):
        for vector, want in zip(got, expected, strict=True):
            assert vector.to_dict() == pytest.approx(want.to_dict(), rel=1e-6)


# -- the task methods: Engine and PoolragClient are one PoolingEngine ------------------------------------
def _assert_outputs_equal(got: list, expected: list, field: str) -> None:
    """Same request ids, prompts and results; the engine also knows the token ids of texts."""
    assert [(o.request_id, o.prompt) for o in got] == [(o.request_id, o.prompt) for o in expected]
    for a, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(getattr(a.outputs, field), getattr(e.outputs, field), atol=1e-6)


@pytest.mark.parametrize("model", ["minilm", "cross_encoder", "colbert", "bge_m3"])
def test_engine_and_client_are_pooling_engines_and_only_the_engine_is_in_process(
    request: pytest.FixtureRequest, model: str
) -> None:
    served: Served = request.getfixturevalue(model)
    for backend in (served.engine, served.client):
        assert isinstance(backend, PoolingEngine) and isinstance(backend, PoolingBackend)
    assert isinstance(served.engine, InProcessEngine)
    assert not isinstance(served.client, InProcessEngine)  # no tokenizer or batch budget over HTTP
    if "embed" in served.engine.facts.supported_tasks:  # the cache: a PoolingBackend, arrays only
        cached = CachedEmbedder(served.engine, EmbeddingCache(served.cache_dir / "protocol.sqlite"))
        assert not isinstance(cached, PoolingEngine)


@pytest.mark.parametrize("kind", DIRECT)
def test_embed_and_encode_give_the_engines_outputs_sync_and_async(minilm: Served, kind: str) -> None:
    backend = minilm.direct(kind)
    params = PoolingParams(input_type="query")
    expected = minilm.engine.embed(TEXTS, params)
    token_prompt = {"prompt_token_ids": minilm.engine.tokenize(TEXTS[1])}
    for got in (backend.embed(TEXTS, params), asyncio.run(backend.aembed(TEXTS, params))):
        assert all(type(out.outputs) is EmbeddingOutput for out in got)
        _assert_outputs_equal(got, expected, "embedding")
    single = backend.embed(TEXTS[0])
    _assert_outputs_equal(single, minilm.engine.embed(TEXTS[0]), "embedding")
    by_ids = backend.embed([token_prompt])
    assert by_ids[0].prompt_token_ids == minilm.engine.embed([token_prompt])[0].prompt_token_ids
    expected_tokens = minilm.engine.encode(TEXTS, "token_embed")
    for got in (backend.encode(TEXTS, "token_embed"), asyncio.run(backend.aencode(TEXTS, "token_embed"))):
        assert [o.outputs.data.shape for o in got] == [o.outputs.data.shape for o in expected_tokens]
        _assert_outputs_equal(got, expected_tokens, "data")
    assert backend.embed([]) == [] and backend.encode([], "token_embed") == []


@pytest.mark.parametrize("kind", DIRECT)
def test_classify_and_reward_give_the_engines_outputs_sync_and_async(
    cross_encoder: Served, kind: str
) -> None:
    backend = cross_encoder.direct(kind)
    engine = cross_encoder.engine
    raw = PoolingParams(use_activation=False)
    for params in (None, raw):
        expected = engine.classify(TEXTS, params)
        for got in (backend.classify(TEXTS, params), asyncio.run(backend.aclassify(TEXTS, params))):
            assert all(type(out.outputs) is ClassificationOutput for out in got)
            _assert_outputs_equal(got, expected, "probs")
    assert not np.allclose(
        engine.classify(TEXTS)[0].outputs.probs, engine.classify(TEXTS, raw)[0].outputs.probs
    )
    expected_rewards = engine.reward(TEXTS)
    for got in (backend.reward(TEXTS), asyncio.run(backend.areward(TEXTS))):
        _assert_outputs_equal(got, expected_rewards, "data")


@pytest.mark.parametrize(("model", "kind"), [(m, k) for m in ("minilm", "cross_encoder") for k in DIRECT])
def test_score_gives_the_engines_scores_one_to_one_one_to_many_and_pairs(
    request: pytest.FixtureRequest, model: str, kind: str
) -> None:
    served: Served = request.getfixturevalue(model)
    backend = served.direct(kind)
    queries = [QUERY, "Where is Paris?", "greeting", "plants"]  # more pairs than one request carries
    cases = [(QUERY, TEXTS[0]), (QUERY, TEXTS), (queries, TEXTS), ([QUERY], TEXTS)]
    for text_1, text_2 in cases:
        expected = served.engine.score(text_1, text_2)
        for got in (backend.score(text_1, text_2), asyncio.run(backend.ascore(text_1, text_2))):
            assert all(type(out.outputs) is ScoringOutput for out in got)
            _assert_outputs_equal(got, expected, "score")
    assert backend.score([], []) == []
    for text_1, text_2 in ((queries[:2], TEXTS), (QUERY, [])):
        with pytest.raises(InvalidInputError) as error:
            served.engine.score(text_1, text_2)
        with pytest.raises(InvalidInputError, match=str(error.value).split(":")[0]):
            backend.score(text_1, text_2)


@pytest.mark.parametrize("kind", DIRECT)
def test_tokenize_gives_the_engines_ids(minilm: Served, kind: str) -> None:
    backend = minilm.direct(kind)
    engine = minilm.engine
    for text in TEXTS:
        assert backend.tokenize(text) == engine.tokenize(text)
        bare = backend.tokenize(text, add_special_tokens=False)
        assert bare == engine.tokenize(text, add_special_tokens=False)
        assert len(bare) == len(engine.tokenize(text)) - engine.tokenizer.num_special_tokens_to_add(
            pair=False
        )
    with pytest.raises(InvalidInputError):
        backend.tokenize("   ")


def test_the_sparse_task_methods_give_the_engines_vectors_through_the_protocol(bge_m3: Served) -> None:
    expected = bge_m3.engine.sparse_embed(TEXTS)
    backends: list[PoolingEngine] = [bge_m3.engine, bge_m3.client]
    for backend in backends:
        for got in (backend.sparse_embed(TEXTS), asyncio.run(backend.asparse_embed(TEXTS))):
            for vector, want in zip(got, expected, strict=True):
                np.testing.assert_array_equal(vector.indices, want.indices)
                np.testing.assert_allclose(vector.values, want.values, rtol=1e-6, atol=1e-6)
