"""PoolragEmbeddings: LangChain's standard integration suites, equality with the engine, prompts,
batching, Matryoshka dimensions, remote mode and input limits."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from langchain_poolrag import PoolragEmbeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests

from poolrag import (
    Engine,
    InputTooLongError,
    InputTypeError,
    InvalidInputError,
)
from poolrag.client import PoolragClient, RemoteError, RemoteInvalidInputError
from poolrag.errors import InvalidTextError
from poolrag.testing.partner_fixtures import DOC, QUERY, loop_turns_until_done
from poolrag.testing.rag_corpus import API_KEY, TEXTS


# -- LangChain's standard suites -------------------------------------------------------------------------
class TestStandardInProcess(EmbeddingsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _engine(self, minilm_engine: Engine) -> None:
        type(self).engine = minilm_engine

    @property
    def embeddings_class(self) -> type[PoolragEmbeddings]:
        return PoolragEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"engine": self.engine}


class TestStandardRemote(EmbeddingsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _url(self, minilm_url: str) -> None:
        type(self).url = minilm_url

    @property
    def embeddings_class(self) -> type[PoolragEmbeddings]:
        return PoolragEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"base_url": self.url}


# -- same vectors as the engine --------------------------------------------------------------------------
def test_documents_and_query_are_the_engines_vectors(minilm_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    documents = np.asarray(embeddings.embed_documents(TEXTS), dtype=np.float32)
    query = np.asarray(embeddings.embed_query("capital of France"), dtype=np.float32)
    np.testing.assert_array_equal(documents, minilm_engine.embed_array(TEXTS, DOC))
    np.testing.assert_array_equal(query, minilm_engine.embed_array(["capital of France"], QUERY)[0])
    assert documents.shape == (len(TEXTS), 384)
    assert all(isinstance(x, float) for x in embeddings.embed_query("x"))


def test_model_name_loads_the_same_model_in_process(minilm_path: Path, minilm_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(model_name=str(minilm_path))
    assert isinstance(embeddings.backend, Engine) and embeddings.backend is not minilm_engine
    np.testing.assert_array_equal(
        np.asarray(embeddings.embed_documents(TEXTS[:3]), dtype=np.float32),
        minilm_engine.embed_array(TEXTS[:3], DOC),
    )


def test_input_type_selects_the_models_query_and_document_prompts(
    prompted_minilm_path: Path, minilm_engine: Engine
) -> None:
    embeddings = PoolragEmbeddings(model_name=str(prompted_minilm_path))
    text = "capital of France"
    query = np.asarray(embeddings.embed_query(text), dtype=np.float32)
    document = np.asarray(embeddings.embed_documents([text])[0], dtype=np.float32)
    np.testing.assert_allclose(query, minilm_engine.embed_array(["query: " + text])[0], atol=1e-6)
    np.testing.assert_allclose(document, minilm_engine.embed_array(["passage: " + text])[0], atol=1e-6)
    assert not np.allclose(query, document, atol=1e-3)
    # the documented way to keep matching an index HuggingFaceEmbeddings built: no prompt on either side
    plain = PoolragEmbeddings(
        model_name=str(prompted_minilm_path), encode_kwargs={"prompt": ""}, query_encode_kwargs={"prompt": ""}
    )
    bare = minilm_engine.embed_array([text])[0]
    np.testing.assert_allclose(plain.embed_query(text), bare, atol=1e-6)
    np.testing.assert_allclose(plain.embed_documents([text])[0], bare, atol=1e-6)


def test_newlines_reach_the_engine_as_poolrag_ingest_keeps_them(
    minilm_engine: Engine, engine_calls: list[list[str]]
) -> None:
    """``HuggingFaceEmbeddings`` turns newlines into spaces; here texts reach the engine as given, as
    ``poolrag ingest`` and the cache embed them, so chunks added through LangChain hit the cache an
    ingest filled (the documented difference)."""
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    embeddings.embed_documents(["Title\n\nFirst line.\nSecond line.", "one line"])
    embeddings.embed_query("two\nlines")
    assert engine_calls == [["Title\n\nFirst line.\nSecond line.", "one line"], ["two\nlines"]]
    with pytest.raises(InputTypeError, match="list of strings"):
        embeddings.embed_documents("not\na list")  # type: ignore[arg-type]


def test_the_whole_list_goes_to_the_engine_in_one_call(
    minilm_engine: Engine, engine_calls: list[list[str]]
) -> None:
    texts = [f"document number {i} about topic {i % 7}" for i in range(300)]
    vectors = PoolragEmbeddings(engine=minilm_engine).embed_documents(texts)
    assert engine_calls == [texts]  # the engine, not the adapter, splits by token budget
    assert len(vectors) == 300


def _bar_counts(stderr: str, total: int) -> list[int]:
    """The counts tqdm drew for a bar of ``total`` texts, in order, each once (``"Embedding: ... 128/300"``;
    tqdm draws the last one again when the bar closes)."""
    drawn = [int(n) for n in re.findall(rf"Embedding: .*?\b(\d+)/{total}\b", stderr.replace("\r", "\n"))]
    return [n for i, n in enumerate(drawn) if i == 0 or n != drawn[i - 1]]


@pytest.mark.parametrize("setting", [{"show_progress": True}, {"encode_kwargs": {"show_progress_bar": True}}])
async def test_show_progress_draws_a_bar_on_stderr_that_advances_as_pieces_come_back(
    minilm_engine: Engine, engine_calls: list[list[str]], capsys: pytest.CaptureFixture[str], setting: dict
) -> None:
    """HuggingFaceEmbeddings' show_progress: a bar of the right total from the start, moving as each
    piece of the list comes back (not 0 then 100% at the end), the same vectors as one call."""
    texts = [f"document number {i} about topic {i % 7}" for i in range(300)]
    embeddings = PoolragEmbeddings(engine=minilm_engine, **setting)
    expected = minilm_engine.embed_array(texts, DOC)
    engine_calls.clear()
    for asynchronous in (False, True):
        vectors = (
            await embeddings.aembed_documents(texts) if asynchronous else embeddings.embed_documents(texts)
        )
        captured = capsys.readouterr()
        assert _bar_counts(captured.err, 300) == [0, 128, 256, 300] and captured.out == ""
        np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert [len(call) for call in engine_calls] == [128, 128, 44]  # the sync call's pieces
    embeddings.embed_query("ocean")  # one text: no bar, as for the empty list
    embeddings.embed_documents([])
    assert capsys.readouterr().err == ""


async def test_without_show_progress_nothing_is_drawn(
    minilm_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    texts = [f"document number {i}" for i in range(300)]
    embeddings.embed_documents(texts)
    await embeddings.aembed_documents(texts)
    assert capsys.readouterr().err == ""


async def test_async_methods_equal_sync(minilm_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    np.testing.assert_array_equal(await embeddings.aembed_documents(TEXTS), embeddings.embed_documents(TEXTS))
    np.testing.assert_array_equal(await embeddings.aembed_query("ocean"), embeddings.embed_query("ocean"))


async def test_async_embedding_does_not_block_the_event_loop(minilm_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(engine=minilm_engine)
    turns, vectors = await loop_turns_until_done(embeddings.aembed_documents([f"t {i}" for i in range(64)]))
    assert turns >= 1 and len(vectors) == 64


# -- Matryoshka ----------------------------------------------------------------------------------------------
def test_dimensions_gives_the_engines_truncated_vectors(matryoshka_engine: Engine) -> None:
    embeddings = PoolragEmbeddings(engine=matryoshka_engine, dimensions=128)
    documents = np.asarray(embeddings.embed_documents(TEXTS), dtype=np.float32)
    query = np.asarray(embeddings.embed_query("ocean"), dtype=np.float32)
    assert documents.shape == (len(TEXTS), 128) and query.shape == (128,)
    np.testing.assert_array_equal(
        documents, matryoshka_engine.embed_array(TEXTS, DOC.with_updates(dimensions=128))
    )
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)


def test_remote_dimensions_equal_in_process(matryoshka_engine: Engine, matryoshka_url: str) -> None:
    local = PoolragEmbeddings(engine=matryoshka_engine, dimensions=256)
    remote = PoolragEmbeddings(base_url=matryoshka_url, dimensions=256)
    assert remote.embed_documents(TEXTS) == local.embed_documents(TEXTS)
    assert len(remote.embed_query("ocean")) == 256 and remote.embed_query("ocean") == local.embed_query(
        "ocean"
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"dimensions": 128}, "not a Matryoshka model"),
        ({"dimensions": 0}, "dimensions must be between 1 and 384, got 0"),
        ({"dimensions": 500}, "dimensions must be between 1 and 384, got 500"),
        ({"truncate_prompt_tokens": 0}, "truncate_prompt_tokens must be a positive number of tokens or -1"),
    ],
)
def test_a_setting_the_model_cannot_take_is_refused_when_the_class_is_built(
    minilm_engine: Engine, setting: dict[str, int], message: str
) -> None:
    # pydantic wraps what a validator raises in its ValidationError (a ValueError), message kept
    with pytest.raises(ValueError, match=message):
        PoolragEmbeddings(engine=minilm_engine, **setting)


def test_a_model_without_the_embed_task_is_refused_when_the_class_is_built(
    cross_encoder_engine: Engine,
) -> None:
    with pytest.raises(ValueError, match="task 'embed' is not supported by this model"):
        PoolragEmbeddings(engine=cross_encoder_engine)


# -- HuggingFaceEmbeddings' arguments ------------------------------------------------------------------------
def test_huggingface_embeddings_arguments_run_unchanged(minilm_path: Path, minilm_engine: Engine) -> None:
    """LangChain's own HuggingFaceEmbeddings example, with the class name swapped."""
    embeddings = PoolragEmbeddings(
        model_name=str(minilm_path),
        model_kwargs={"device": "cpu"},
        encode_kwargs={"normalize_embeddings": False, "batch_size": 16},
        show_progress=True,
    )
    assert embeddings.backend.device.type == "cpu"
    # its other fields: the hub cache folder is the engine's download_dir; multi_process changes nothing
    cached = PoolragEmbeddings(model_name=str(minilm_path), cache_folder="/tmp/hf-cache", multi_process=False)
    assert cached.backend.engine_args.download_dir == "/tmp/hf-cache"
    assert cached.embed_query("ocean") == PoolragEmbeddings(engine=minilm_engine).embed_query("ocean")
    # sentence-transformers' normalize_embeddings=False keeps the folder's Normalize module: unit rows
    assert embeddings.embed_documents(TEXTS) == PoolragEmbeddings(engine=minilm_engine).embed_documents(TEXTS)
    prompted = PoolragEmbeddings(engine=minilm_engine, query_encode_kwargs={"prompt": "query: "})
    np.testing.assert_allclose(
        prompted.embed_query("ocean"), minilm_engine.embed_array(["query: ocean"])[0], atol=1e-6
    )
    assert prompted.embed_documents(["ocean"]) == PoolragEmbeddings(engine=minilm_engine).embed_documents(
        ["ocean"]
    )
    forced = PoolragEmbeddings(engine=minilm_engine, encode_kwargs={"normalize_embeddings": True})
    assert forced._params("document").normalize is True
    # query_encode_kwargs replace encode_kwargs for queries (not merged), as in HuggingFaceEmbeddings
    both = PoolragEmbeddings(
        engine=minilm_engine,
        encode_kwargs={"prompt": "passage: "},
        query_encode_kwargs={"normalize_embeddings": True},
    )
    assert both.embed_query("ocean") == PoolragEmbeddings(engine=minilm_engine).embed_query("ocean")
    np.testing.assert_allclose(
        both.embed_documents(["ocean"])[0], minilm_engine.embed_array(["passage: ocean"])[0], atol=1e-6
    )


def test_a_prompt_name_the_folder_lacks_is_refused_where_the_model_is_known(
    minilm_engine: Engine, minilm_url: str
) -> None:
    """``prompt_name`` picks one of the folder's prompts (the engine's and the server's tests check the
    vectors); all-MiniLM-L6-v2's folder has none, so a name is refused when the class is built here,
    and by the client's check against the served facts, before any request, when remote."""
    with pytest.raises(ValueError, match="prompt_name 'query' is not one of this model's prompts"):
        PoolragEmbeddings(engine=minilm_engine, query_encode_kwargs={"prompt_name": "query"})
    remote = PoolragEmbeddings(
        base_url=minilm_url, model_name="minilm", encode_kwargs={"prompt_name": "document"}
    )
    assert remote._params("document").prompt_name == "document"
    with pytest.raises(InvalidInputError, match="its folder names none") as error:
        remote.embed_documents(["ocean"])
    assert not isinstance(error.value, RemoteInvalidInputError)


def test_truncate_dim_is_dimensions(matryoshka_engine: Engine, minilm_path: Path) -> None:
    embeddings = PoolragEmbeddings(
        model_name=str(minilm_path),
        model_kwargs={"truncate_dim": 128},
        engine_kwargs={"hf_overrides": {"matryoshka_dimensions": [128, 256, 384]}},
    )
    assert embeddings.dimensions == 128
    assert embeddings.embed_query("ocean") == PoolragEmbeddings(
        engine=matryoshka_engine, dimensions=128
    ).embed_query("ocean")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"model_kwargs": {"cache_dir": "x"}}, r"model_kwargs \['cache_dir'\] have no counterpart here"),
        ({"encode_kwargs": {"precision": "int8"}}, r"encode_kwargs \['precision'\] have no counterpart here"),
        ({"model_kwargs": {"truncate_dim": 128}, "dimensions": 256}, "truncate_dim and dimensions disagree"),
        (
            {"model_kwargs": {"device": "cpu"}, "base_url": "http://127.0.0.1:9"},
            "model_kwargs. device / trust_remote_code / revision. configure",
        ),
    ],
)
def test_huggingface_arguments_without_a_counterpart_are_refused(arguments: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PoolragEmbeddings(**arguments)


# -- remote -------------------------------------------------------------------------------------------------
async def test_remote_equals_in_process(minilm_engine: Engine, minilm_url: str) -> None:
    local = PoolragEmbeddings(engine=minilm_engine)
    remote = PoolragEmbeddings(base_url=minilm_url, model_name="minilm")
    assert isinstance(remote.backend, PoolragClient)
    np.testing.assert_array_equal(remote.embed_documents(TEXTS), local.embed_documents(TEXTS))
    np.testing.assert_array_equal(remote.embed_query("ocean"), local.embed_query("ocean"))
    np.testing.assert_array_equal(await remote.aembed_documents(TEXTS), local.embed_documents(TEXTS))
    np.testing.assert_array_equal(await remote.aembed_query("ocean"), local.embed_query("ocean"))


def test_remote_lists_longer_than_one_request_are_split_and_kept_in_order(
    minilm_engine: Engine, minilm_url: str
) -> None:
    client = PoolragClient(minilm_url, max_inputs_per_request=3)
    texts = [f"sentence {i}: {TEXTS[i % len(TEXTS)]}" for i in range(10)]
    remote = np.asarray(PoolragEmbeddings(client=client).embed_documents(texts), dtype=np.float32)
    np.testing.assert_allclose(remote, minilm_engine.embed_array(texts, DOC), atol=1e-6)


def test_remote_with_api_key(keyed_minilm_url: str, minilm_engine: Engine) -> None:
    vector = PoolragEmbeddings(base_url=keyed_minilm_url, api_key=API_KEY).embed_query("ocean")
    np.testing.assert_array_equal(vector, minilm_engine.embed_array(["ocean"], QUERY)[0])
    with pytest.raises(RemoteError) as error:
        PoolragEmbeddings(base_url=keyed_minilm_url, api_key="wrong").embed_query("ocean")
    assert error.value.status_code == 401


def test_remote_bad_input_is_a_value_error(minilm_url: str) -> None:
    """Refused before it is sent, by the engine's rule and in its words, as in process."""
    with pytest.raises(InvalidTextError, match=r"input\[1\] is empty") as error:
        PoolragEmbeddings(base_url=minilm_url).embed_documents(["fine", ""])
    assert isinstance(error.value, ValueError)


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(RemoteError, match="cannot reach poolrag server"):
        PoolragEmbeddings(base_url="http://127.0.0.1:9").embed_query("ocean")


# -- input limits and bad input ------------------------------------------------------------------------
def test_long_inputs_are_cut_at_the_model_maximum_unless_asked_not_to(minilm_engine: Engine) -> None:
    long_text = "word " * 2000
    vector = PoolragEmbeddings(engine=minilm_engine).embed_query(long_text)
    np.testing.assert_array_equal(vector, minilm_engine.embed_array([long_text], QUERY)[0])
    with pytest.raises(InputTooLongError):
        PoolragEmbeddings(engine=minilm_engine, truncate_prompt_tokens=None).embed_query(long_text)


def test_pickled_and_deep_copied_embeddings_give_the_same_vectors(
    minilm_engine: Engine, minilm_url: str, tmp_path: Path
) -> None:
    """As ``HuggingFaceEmbeddings`` does: the engine goes along as the arguments that made it (a
    worker process loads it again), a deep copy shares it, a remote one keeps its settings."""
    import copy
    import pickle

    local = PoolragEmbeddings(engine=minilm_engine)
    for again in (pickle.loads(pickle.dumps(local)), copy.deepcopy(local)):
        assert again.embed_documents(TEXTS) == local.embed_documents(TEXTS)
    remote = PoolragEmbeddings(base_url=minilm_url)
    assert pickle.loads(pickle.dumps(remote)).embed_query("ocean") == local.embed_query("ocean")
    cached = PoolragEmbeddings(engine=minilm_engine, cache=tmp_path / "vectors.sqlite")  # the file goes along
    for again in (pickle.loads(pickle.dumps(cached)), copy.deepcopy(cached)):
        assert again.embed_documents(TEXTS) == local.embed_documents(TEXTS)
