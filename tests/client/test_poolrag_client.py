"""PoolragClient against a live ``poolrag serve`` app: the engine's numpy results, exactly, sync
and async; long lists split into requests; errors mapped onto poolrag's error family; a server
restarted with other weights refused; connections closed on every event loop."""

from __future__ import annotations

import asyncio
import gc
import math
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

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
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.client import (
    PoolragClient,
    RemoteConnectionError,
    RemoteError,
    RemoteInvalidInputError,
    RemoteTimeoutError,
    ServedModelChangedError,
)
from poolrag.errors import InvalidTextError
from poolrag.retrieval import CrossEncoderReranker
from poolrag.server import ServerSettings, create_app
from poolrag.testing.live_server import LiveServer, serve
from poolrag.testing.rag_corpus import API_KEY, TEXTS
from poolrag.testing.tiny_models import build_encoder, write_sentence_transformers

QUERY = "Which organelle produces energy in cells?"


@pytest.fixture(scope="module")
def minilm_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm", max_inputs=16)


@pytest.fixture(scope="module")
def keyed_url(minilm_engine: Engine) -> Iterator[str]:
    yield from serve(minilm_engine, "minilm", api_key=API_KEY)


@pytest.fixture(scope="module")
def cross_encoder_engine(assets: Path) -> Engine:
    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


@pytest.fixture(scope="module")
def cross_encoder_url(cross_encoder_engine: Engine) -> Iterator[str]:
    yield from serve(cross_encoder_engine, "reranker")


@pytest.fixture
def client(minilm_url: str) -> Iterator[PoolragClient]:
    with PoolragClient(minilm_url, model="minilm") as client:
        yield client


# -- the engine's results ------------------------------------------------------------------------------
def test_embed_array_is_bit_identical_to_the_engine(client: PoolragClient, minilm_engine: Engine) -> None:
    for params in (None, PoolingParams(input_type="query"), PoolingParams(truncate_prompt_tokens=-1)):
        remote = client.embed_array(TEXTS, params)
        assert remote.dtype == np.float32 and remote.shape == (len(TEXTS), 384)
        np.testing.assert_array_equal(remote, minilm_engine.embed_array(TEXTS, params))
    np.testing.assert_array_equal(client.embed_array("one text"), minilm_engine.embed_array(["one text"]))


def test_a_cut_past_the_models_length_is_the_models_length_as_in_the_engine(
    client: PoolragClient, minilm_engine: Engine, cross_encoder_url: str, cross_encoder_engine: Engine
) -> None:
    """The engine reads a ``truncate_prompt_tokens`` past ``max_model_len`` as that length; the
    server, speaking vLLM's API, refuses one, so the client sends the model's length instead."""
    long = ["a long passage about rivers and their deltas " * 80]
    past = PoolingParams(truncate_prompt_tokens=minilm_engine.max_model_len + 100)
    np.testing.assert_array_equal(client.embed_array(long, past), minilm_engine.embed_array(long, past))
    pairs = ["rivers", ["deltas " * 900, "a short passage"]]
    with PoolragClient(cross_encoder_url) as reranker:
        past = PoolingParams(truncate_prompt_tokens=cross_encoder_engine.max_model_len + 1)
        np.testing.assert_allclose(
            reranker.score_array(*pairs, past), cross_encoder_engine.score_array(*pairs, past), rtol=1e-6
        )


def test_token_id_prompts_are_sent_as_token_ids(client: PoolragClient, minilm_engine: Engine) -> None:
    prompt = {"prompt_token_ids": minilm_engine.tokenize("Paris is in France")}
    np.testing.assert_array_equal(client.embed_array([prompt]), minilm_engine.embed_array([prompt]))


def test_a_list_mixing_texts_and_token_prompts_gets_the_engines_vectors(
    client: PoolragClient, minilm_engine: Engine
) -> None:
    """The engine takes texts and token prompts in one list; the server reads an ``input`` list as
    all texts or all token ids (OpenAI's and vLLM's rule), so the client sends runs of one kind."""
    ids = minilm_engine.tokenize("Paris is in France")
    mixed = ["a text first", {"prompt_token_ids": ids}, {"prompt_token_ids": ids[:3]}, TEXTS[0], TEXTS[1]]
    local = minilm_engine.embed_array(mixed)
    np.testing.assert_array_equal(client.embed_array(mixed), local)
    np.testing.assert_array_equal(asyncio.run(client.aembed_array(mixed)), local)
    assert [out.prompt_token_ids for out in client.embed(mixed)][1:3] == [ids, ids[:3]]


def test_encode_arrays_returns_the_engines_per_token_matrices(
    client: PoolragClient, minilm_engine: Engine
) -> None:
    remote = client.encode_arrays(TEXTS[:3], "token_embed")
    local = [out.outputs.data for out in minilm_engine.encode(TEXTS[:3], "token_embed")]
    assert [m.shape for m in remote] == [m.shape for m in local]
    for r, m in zip(remote, local, strict=True):
        np.testing.assert_array_equal(r, m)


def test_score_array_equals_engine_score(client: PoolragClient, minilm_engine: Engine) -> None:
    local = [out.outputs.score for out in minilm_engine.score(QUERY, TEXTS)]
    np.testing.assert_allclose(client.score_array(QUERY, TEXTS), local, rtol=1e-6)


def test_score_array_takes_one_query_as_the_protocol_says(client: PoolragClient) -> None:
    with pytest.raises(InputTypeError, match="text_1 must be one string"):
        client.score_array(TEXTS[:3], TEXTS[3:6])  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="text_1 must be one string"):
        asyncio.run(client.ascore_array(TEXTS[:3], TEXTS[3:6]))  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="text_2 must be a list"):
        client.score_array(QUERY, "one document")


def test_score_checks_the_callers_parameters_like_the_engine(
    client: PoolragClient, minilm_engine: Engine, cross_encoder_url: str, cross_encoder_engine: Engine
) -> None:
    """``dimensions`` on score: the engine's error, raised here before anything is sent.

    The cross-encoder is compared with the engine; for the cosine model, with the rule itself
    (``PoolingParams.verify``), since the engine's similarity path drops ``dimensions`` unread."""
    params = PoolingParams(dimensions=8)
    with PoolragClient(cross_encoder_url) as reranker_client:
        with pytest.raises(DimensionsError) as engine_error:
            cross_encoder_engine.score_array(QUERY, TEXTS, params)
        with pytest.raises(DimensionsError) as rule_error:
            params.verify("score", minilm_engine.facts)
        for remote, local in ((reranker_client, engine_error), (client, rule_error)):
            for call in (
                lambda r=remote: r.score_array(QUERY, TEXTS, params),
                lambda r=remote: asyncio.run(r.ascore_array(QUERY, TEXTS, params)),
            ):
                with pytest.raises(DimensionsError) as error:
                    call()
                assert type(error.value) is type(local.value) and str(error.value) == str(local.value)
                assert not isinstance(error.value, RemoteInvalidInputError)  # refused before sending


def test_rerank_is_best_first_with_the_engines_scores(
    cross_encoder_url: str, cross_encoder_engine: Engine
) -> None:
    scores = np.asarray([out.outputs.score for out in cross_encoder_engine.score(QUERY, TEXTS)])
    with PoolragClient(cross_encoder_url) as client:
        ranked = client.rerank(QUERY, TEXTS, top_n=3)
        assert [r.index for r in ranked] == list(np.argsort(-scores)[:3])
        np.testing.assert_allclose([r.score for r in ranked], np.sort(scores)[::-1][:3], rtol=1e-6)
        assert [r.rerank_score for r in ranked] == [r.score for r in ranked]  # replaced: one score
        assert client.rerank(QUERY, []) == []


FIRST_STAGE = [0.91, 0.35, 0.62, 0.60, 0.12, 0.55, 0.30, 0.48]


@pytest.mark.parametrize(
    ("options", "in_process"),
    [
        ({"first_stage_scores": FIRST_STAGE}, {"first_stage_scores": FIRST_STAGE}),
        (
            {"first_stage_scores": FIRST_STAGE, "second_stage": "rrf", "rerank_weight": 0.25},
            {"first_stage_scores": FIRST_STAGE, "second_stage": "rrf", "weight": 0.25},
        ),
        (
            {"first_stage_scores": FIRST_STAGE, "second_stage": "replace"},
            {"first_stage_scores": FIRST_STAGE, "second_stage": "replace"},
        ),
        ({"second_stage": "fuse"}, {}),  # no scores: the input order is the first stage
    ],
)
def test_rerank_second_stage_equals_the_in_process_reranker(
    cross_encoder_url: str, cross_encoder_engine: Engine, options: dict, in_process: dict
) -> None:
    assert len(FIRST_STAGE) == len(TEXTS)
    local = CrossEncoderReranker(cross_encoder_engine).rerank(QUERY, TEXTS, **in_process)
    with PoolragClient(cross_encoder_url) as client:
        for remote in (
            client.rerank(QUERY, TEXTS, **options),
            asyncio.run(client.arerank(QUERY, TEXTS, **options)),
        ):
            assert [r.index for r in remote] == [int(i) for i in local.order]
            np.testing.assert_allclose([r.score for r in remote], local.scores[local.order], rtol=1e-12)
            np.testing.assert_allclose(
                [r.rerank_score for r in remote], local.rerank_scores[local.order], rtol=1e-12
            )
        with pytest.raises(RemoteInvalidInputError, match="first_stage_scores"):
            client.rerank(QUERY, TEXTS, first_stage_scores=[1.0])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_rerank_refuses_scores_json_cannot_carry_as_the_in_process_reranker_does(
    cross_encoder_url: str, cross_encoder_engine: Engine, bad: float
) -> None:
    scores = [bad, *FIRST_STAGE[1:]]
    with pytest.raises(InvalidInputError) as local:
        CrossEncoderReranker(cross_encoder_engine).rerank(QUERY, TEXTS, scores)
    with PoolragClient(cross_encoder_url) as client:
        for call in (
            lambda: client.rerank(QUERY, TEXTS, first_stage_scores=scores),
            lambda: asyncio.run(client.arerank(QUERY, TEXTS, first_stage_scores=scores)),
        ):
            with pytest.raises(InvalidInputError) as remote:
                call()
            assert str(remote.value) == str(local.value)
        with pytest.raises(InvalidInputError, match="reranker weight must be a number in"):
            client.rerank(QUERY, TEXTS, first_stage_scores=FIRST_STAGE, rerank_weight=bad)


@pytest.mark.parametrize("documents", ["", None, "one text"])
def test_rerank_refuses_documents_that_are_not_a_list_as_the_in_process_reranker_does(
    cross_encoder_url: str, cross_encoder_engine: Engine, documents: object
) -> None:
    """An empty string or None is not "no documents": answering [] hid the caller's mistake."""
    with pytest.raises(InputTypeError) as local:
        CrossEncoderReranker(cross_encoder_engine).rerank(QUERY, documents)  # type: ignore[arg-type]
    with PoolragClient(cross_encoder_url) as client:
        for call in (
            lambda: client.rerank(QUERY, documents),  # type: ignore[arg-type]
            lambda: asyncio.run(client.arerank(QUERY, documents)),  # type: ignore[arg-type]
        ):
            with pytest.raises(InputTypeError) as remote:
                call()
            assert str(remote.value) == str(local.value).replace("passages", "documents")


@pytest.mark.parametrize("bad", [None, 5, ["a"]])
def test_rerank_names_a_document_that_is_not_text_as_the_in_process_reranker_does(
    cross_encoder_url: str, cross_encoder_engine: Engine, bad: object
) -> None:
    documents = ["Bees dance.", bad]
    with pytest.raises(InputTypeError) as local:
        CrossEncoderReranker(cross_encoder_engine).rerank(QUERY, documents)  # type: ignore[arg-type]
    assert local.value.param == "text_2" and str(local.value).startswith("text_2[1] must be")
    with PoolragClient(cross_encoder_url) as client, pytest.raises(InputTypeError) as remote:
        client.rerank(QUERY, documents)  # type: ignore[arg-type]
    assert remote.value.param == "documents" and str(remote.value).startswith("documents[1] must be")


def test_async_methods_equal_sync(client: PoolragClient) -> None:
    async def run() -> tuple:
        results = (
            await client.aembed_array(TEXTS),
            await client.ascore_array(QUERY, TEXTS),
            await client.aencode_arrays(TEXTS[:2], "token_embed"),
        )
        await client.aclose()
        return results

    embedded, scores, matrices = asyncio.run(run())
    np.testing.assert_array_equal(embedded, client.embed_array(TEXTS))
    np.testing.assert_array_equal(scores, client.score_array(QUERY, TEXTS))
    for a, b in zip(matrices, client.encode_arrays(TEXTS[:2], "token_embed"), strict=True):
        np.testing.assert_array_equal(a, b)


def test_one_client_serves_several_event_loops(client: PoolragClient) -> None:
    first = asyncio.run(client.aembed_array(TEXTS[:2]))
    second = asyncio.run(client.aembed_array(TEXTS[:2]))  # the first loop is closed by now
    np.testing.assert_array_equal(first, second)


def test_every_event_loops_connections_are_closed(minilm_url: str) -> None:
    """asyncio.run per call, a loop left open and closed after close(): no socket is left behind."""
    gc.collect()  # what earlier tests in this worker left for the collector is not this client's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = PoolragClient(minilm_url)
        asyncio.run(client.aembed_array(TEXTS[:2]))
        asyncio.run(client.aembed_array(TEXTS[:2]))
        loop = asyncio.new_event_loop()
        loop.run_until_complete(client.aembed_array(TEXTS[:2]))
        client.embed_array(TEXTS[:2])
        client.close()  # the open loop's client and the sync one
        loop.close()
        del loop, client
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


def test_aclose_closes_the_sync_client_too(minilm_url: str) -> None:
    async def run(client: PoolragClient) -> None:
        await client.aembed_array(TEXTS[:1])
        await client.aclose()

    gc.collect()  # as above: only this client's sockets are counted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = PoolragClient(minilm_url)
        client.embed_array(TEXTS[:1])
        asyncio.run(run(client))
        del client
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("per_request", [5, 16])
def test_long_lists_are_split_into_requests_and_kept_in_order(
    minilm_url: str, minilm_engine: Engine, per_request: int
) -> None:
    texts = [f"{i}: {TEXTS[i % len(TEXTS)]}" for i in range(40)]  # the server takes at most 16 per request
    client = PoolragClient(minilm_url, max_inputs_per_request=per_request, max_concurrency=3)
    np.testing.assert_allclose(client.embed_array(texts), minilm_engine.embed_array(texts), atol=1e-6)
    np.testing.assert_allclose(
        asyncio.run(client.aembed_array(texts)), minilm_engine.embed_array(texts), atol=1e-6
    )
    local = [out.outputs.score for out in minilm_engine.score(QUERY, texts)]
    np.testing.assert_allclose(client.score_array(QUERY, texts), local, atol=1e-6)


def test_long_lists_are_split_at_the_servers_own_limit(minilm_url: str, minilm_engine: Engine) -> None:
    """The server takes at most 16 inputs a request (its card says so); the client's own limit is
    256: a call of 40 texts is split at 16, not refused with a 400."""
    texts = [f"{i}: {TEXTS[i % len(TEXTS)]}" for i in range(40)]
    local = [out.outputs.score for out in minilm_engine.score(QUERY, texts)]
    with PoolragClient(minilm_url) as client:
        np.testing.assert_allclose(client.embed_array(texts), minilm_engine.embed_array(texts), atol=1e-6)
        np.testing.assert_allclose(client.score_array(QUERY, texts), local, atol=1e-6)
        assert len(client.encode_arrays(texts, "token_embed")) == 40
    with PoolragClient(minilm_url, model="minilm") as client:
        vectors = asyncio.run(client.aembed_array(texts))
        np.testing.assert_allclose(vectors, minilm_engine.embed_array(texts), atol=1e-6)
        np.testing.assert_allclose(asyncio.run(client.ascore_array(QUERY, texts)), local, atol=1e-6)


def test_classify_is_split_at_the_servers_own_limit(tiny_model: Callable[..., Path]) -> None:
    texts = [f"text {i}" for i in range(10)]
    with Engine(tiny_model("bert", head="sequence", num_labels=3)) as engine:
        app = create_app(engine, ServerSettings(served_model_names=("classifier",), max_inputs=4))
        with LiveServer(app) as live, PoolragClient(live.url) as client:
            assert len(client.classify(texts)) == len(asyncio.run(client.aclassify(texts))) == 10


def test_async_calls_send_no_more_at_once_than_the_server_admits(minilm_engine: Engine) -> None:
    """A server admits one request at a time (--max-queue 1, on its card); the client sent 4 of a
    call's requests at once (and LlamaIndex runs calls side by side), and an idle server refused
    the rest with 503."""
    texts = [f"{i}: {TEXTS[i % len(TEXTS)]}" for i in range(40)]
    app = create_app(minilm_engine, ServerSettings(served_model_names=("minilm",), max_inputs=4, max_queue=1))

    async def two_calls(client: PoolragClient) -> list[np.ndarray]:
        return await asyncio.gather(client.aembed_array(texts[:20]), client.aembed_array(texts[20:]))

    with LiveServer(app) as live, PoolragClient(live.url, max_retries=0) as client:
        vectors = np.concatenate(asyncio.run(two_calls(client)))
    np.testing.assert_allclose(vectors, minilm_engine.embed_array(texts), atol=1e-6)


def test_empty_inputs_are_answered_as_the_engine_does(client: PoolragClient) -> None:
    assert client.embed_array([]).shape == (0, 384)  # the engine's shape: the width is a fact
    assert client.encode_arrays([], "token_embed") == []
    with pytest.raises(InvalidInputError, match="non-empty"):  # as the engine: nothing to score against
        client.score_array(QUERY, [])


# -- errors ------------------------------------------------------------------------------------------------
def test_bad_input_rejected_by_the_server_is_a_value_error(client: PoolragClient) -> None:
    with pytest.raises(RemoteInvalidInputError, match=r"token ids must be in \[0, ") as error:
        client.embed_array([{"prompt_token_ids": [101, 10**7, 102]}])
    assert error.value.status_code == 400 and isinstance(error.value, ValueError)


def test_an_unreadable_token_prompt_refused_by_the_server_reads_as_the_engines_error(
    minilm_url: str, minilm_engine: Engine
) -> None:
    """The server's ``empty_input`` is an ``InvalidTextError`` with the engine's attributes (where,
    what, whether empty), named where the caller's list has it."""
    prompts = [{"prompt_token_ids": [101, 102]}] * 20 + [{"prompt_token_ids": []}]  # in the 3rd request
    with pytest.raises(InvalidTextError) as local:
        minilm_engine.embed_array(prompts)
    with pytest.raises(InvalidTextError) as remote:
        PoolragClient(minilm_url, max_inputs_per_request=8).embed_array(prompts)
    assert isinstance(remote.value, RemoteInvalidInputError)
    for attribute in ("field", "index", "problem", "empty"):
        assert getattr(remote.value, attribute) == getattr(local.value, attribute)
    assert str(remote.value.renamed("documents", 3)) == str(local.value.renamed("documents", 3))


def test_parameters_are_checked_against_the_served_facts_before_sending(
    client: PoolragClient, minilm_engine: Engine
) -> None:
    assert client.facts == minilm_engine.facts.renamed("minilm")
    with pytest.raises(DimensionsError, match="Matryoshka") as error:
        client.embed_array(["text"], PoolingParams(dimensions=7))
    assert not isinstance(error.value, RemoteInvalidInputError)  # refused here, not by the server
    with pytest.raises(UnsupportedTaskError):
        client.encode_arrays(["text"], "classify")
    with pytest.raises(InvalidInputError, match="unknown pooling task"):
        asyncio.run(client.aencode_arrays(["text"], "generate"))


def test_parameters_the_endpoint_would_ignore_are_refused_before_sending(client: PoolragClient) -> None:
    with pytest.raises(InvalidInputError, match="prompt"):
        client.score_array("q", ["d"], PoolingParams(prompt="query: "))


def test_an_explicit_prompt_goes_over_http(client: PoolragClient, minilm_engine: Engine) -> None:
    """/v1/embeddings takes ``prompt`` (a poolrag extension), so the remote vectors are the engine's."""
    params = PoolingParams(prompt="Represent this question: ", input_type="query")
    np.testing.assert_allclose(
        client.embed_array(["text"], params), minilm_engine.embed_array(["text"], params), rtol=0, atol=1e-5
    )
    np.testing.assert_allclose(
        client.embed_array(["text"], params),
        minilm_engine.embed_array(["Represent this question: text"]),
        atol=1e-5,
    )


def test_normalize_false_goes_over_http(client: PoolragClient, minilm_engine: Engine) -> None:
    """/v1/embeddings honours vLLM's ``normalize`` (issue 30, item 4), so the client sends it."""
    for params in (PoolingParams(normalize=False), PoolingParams(use_activation=False)):  # vLLM's newer name
        np.testing.assert_allclose(
            client.embed_array(["text"], params),
            minilm_engine.embed_array(["text"], params),
            rtol=0,
            atol=1e-5,
        )
    assert np.linalg.norm(client.embed_array(["text"], PoolingParams(use_activation=False))[0]) > 1.01


def test_local_checks_match_the_engines(client: PoolragClient) -> None:
    with pytest.raises(InputTypeError):
        client.embed_array([42])  # type: ignore[list-item]
    with pytest.raises(InputTypeError):
        client.score_array(["a", "b"], ["c", "d"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="http"):
        PoolragClient("localhost:8000")


def test_api_key_is_sent_as_a_bearer_token(
    keyed_url: str, minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.testing.assert_array_equal(
        PoolragClient(keyed_url, API_KEY).embed_array(["a"]), minilm_engine.embed_array(["a"])
    )
    monkeypatch.setenv("POOLRAG_API_KEY", API_KEY)
    assert PoolragClient(keyed_url).embed_array(["a"]).shape == (1, 384)  # taken from the environment
    with pytest.raises(RemoteError) as error:
        PoolragClient(keyed_url, "wrong-key").embed_array(["a"])
    assert error.value.status_code == 401 and not isinstance(error.value, (ValueError, ConnectionError))


def test_an_empty_model_name_is_none_as_the_server_reads_it(minilm_url: str, minilm_engine: Engine) -> None:
    """``model=""`` (an unset environment variable, a config left blank) names no model, as
    ``"model": ""`` does on the server and in vLLM: it was refused as a model not served here."""
    client = PoolragClient(minilm_url, model="")
    assert client.model is None
    np.testing.assert_array_equal(client.embed_array(["a"]), minilm_engine.embed_array(["a"]))


def test_unknown_model_name_and_unreachable_server(minilm_url: str) -> None:
    """No answer at all is a ``ConnectionError`` or a ``TimeoutError`` too (openai's
    ``APIConnectionError`` and ``APITimeoutError``), so a retry policy for network errors tells it
    from an answer that is an error."""
    with pytest.raises(InvalidInputError, match="not served here; use 'minilm'"):
        PoolragClient(minilm_url, model="other-model").embed_array(["a"])
    with pytest.raises(RemoteConnectionError, match="cannot reach") as unreachable:
        PoolragClient("http://127.0.0.1:9", timeout=5).embed_array(["a"])
    assert (
        isinstance(unreachable.value, (ConnectionError, RemoteError))
        and unreachable.value.status_code is None
    )
    import socket

    with socket.create_server(("127.0.0.1", 0)) as silent:  # takes the connection, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(
            TimeoutError, match=r"did not answer within timeout=0\.5 s \(ReadTimeout\)"
        ) as slow:
            PoolragClient(url, timeout=0.5).embed_array(["a"])
    assert isinstance(slow.value, RemoteTimeoutError) and not isinstance(slow.value, ConnectionError)


def test_an_unknown_model_is_an_input_error_on_every_call(minilm_url: str, cross_encoder_url: str) -> None:
    """``rerank`` sends without reading the listing: the server's ``404 model_not_found`` is the same
    ``InvalidInputError`` the other calls raise before sending."""
    for url in (minilm_url, cross_encoder_url):
        client = PoolragClient(url, model="other-model")
        for call in (
            lambda c=client: c.rerank(QUERY, TEXTS),
            lambda c=client: asyncio.run(c.arerank(QUERY, TEXTS)),
        ):
            with pytest.raises(RemoteInvalidInputError, match="'other-model' is not served here") as error:
                call()
            assert error.value.status_code == 404 and error.value.param == "model"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "5", True])
def test_a_timeout_that_is_not_a_positive_number_is_refused_when_the_client_is_made(timeout: object) -> None:
    """httpx reads 0 as "do not wait" (every call said the server could not be reached) and refuses
    the others only at the first request, in its own words."""
    with pytest.raises(InvalidInputError, match="timeout must be a number of seconds above 0"):
        PoolragClient("http://127.0.0.1:9", timeout=timeout)  # type: ignore[arg-type]


def test_base_url_may_end_in_v1(minilm_url: str, minilm_engine: Engine) -> None:
    client = PoolragClient(minilm_url + "/v1/")
    assert client.base_url == minilm_url
    np.testing.assert_array_equal(client.embed_array(["a"]), minilm_engine.embed_array(["a"]))


# -- a server restarted with other weights --------------------------------------------------------------
def _tiny_embedder(folder: Path, minilm_path: Path, seed: int, **config: object) -> Engine:
    build_encoder(folder, "bert", minilm_path, seed=seed, **config)
    write_sentence_transformers(folder, normalize=True)
    return Engine(folder)


def test_a_restart_with_other_weights_is_refused_then_read_afresh(minilm_path: Path, tmp_path: Path) -> None:
    """Same name, same URL, same vector size, other weights: no vector of the new model is returned
    under the old facts, and the cache never files one under the old model's keys."""
    old = _tiny_embedder(tmp_path / "old", minilm_path, seed=0)
    # A wider feed-forward layer: the weights' identity reads the config and the files' sizes.
    new = _tiny_embedder(tmp_path / "new", minilm_path, seed=1, intermediate_size=41)
    assert old.facts.embedding_dim == new.facts.embedding_dim
    assert old.facts.model_identity != new.facts.model_identity
    settings = ServerSettings(served_model_names=("embedder",))
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    with LiveServer(create_app(old, settings)) as first:
        port = urlsplit(first.url).port
        clients = [PoolragClient(first.url, model="embedder") for _ in range(4)]
        cached = CachedEmbedder(clients[0], cache)
        np.testing.assert_allclose(cached.embed_array(TEXTS[:2]), old.embed_array(TEXTS[:2]), atol=1e-6)
        assert all(c.facts == old.facts.renamed("embedder") for c in clients)
    with LiveServer(create_app(new, settings), port=port) as second:
        assert second.url == first.url
        for call in (
            lambda: cached.embed_array(TEXTS[2:4]),
            lambda: clients[1].encode_arrays(TEXTS[:1], "token_embed"),
            lambda: clients[2].score_array(QUERY, TEXTS[:2]),
            lambda: asyncio.run(clients[3].aembed_array(TEXTS[:1])),
        ):
            with pytest.raises(ServedModelChangedError, match="now serves other weights") as error:
                call()
            assert isinstance(error.value, InvalidInputError)
        # Read afresh on the next call; the old model's cache entries are not the new model's.
        assert all(c.facts == new.facts.renamed("embedder") for c in clients)
        np.testing.assert_allclose(cached.embed_array(TEXTS[:4]), new.embed_array(TEXTS[:4]), atol=1e-6)
        for c in clients:
            c.close()


def test_a_busy_servers_503_is_sent_again_after_its_retry_after(minilm_engine: Engine) -> None:
    """A server at capacity answers 503 with ``Retry-After`` and runs nothing: the client sends the
    request again after it (``max_retries`` times, 2 by default, as OpenAI's client does), so a
    burst is absorbed rather than raised; ``max_retries=0`` raises the first 503."""
    passages = [f"{i} " + "a sentence about the weather in the mountains " * 20 for i in range(16)]
    want = minilm_engine.embed_array(passages)

    async def burst(clients: list[PoolragClient]) -> list[np.ndarray | BaseException]:
        calls = [client.aembed_array(passages) for client in clients]
        return await asyncio.gather(*calls, return_exceptions=True)

    def clients(max_retries: int) -> list[PoolragClient]:
        """Six apps' clients: one client alone keeps to the server's --max-queue (on its card)."""
        made = [PoolragClient(live.url, max_retries=max_retries) for _ in range(6)]
        for client in made:
            client.embed_array(["warm"])  # reads the facts first: the burst is the embeddings
        return made

    settings = ServerSettings(served_model_names=("minilm",), max_queue=1)
    with LiveServer(create_app(minilm_engine, settings)) as live:
        impatient = clients(0)
        refused = [r for r in asyncio.run(burst(impatient)) if isinstance(r, BaseException)]
        assert refused and all(isinstance(r, RemoteError) and r.status_code == 503 for r in refused)
        patient = clients(1000)  # retries until served, however busy
        for got in asyncio.run(burst(patient)):
            assert not isinstance(got, BaseException), got
            np.testing.assert_allclose(got, want, atol=1e-6)
        for client in impatient + patient:
            client.close()
    with pytest.raises(InvalidInputError, match="max_retries must be a count"):
        PoolragClient("http://127.0.0.1:9", max_retries=-1)
