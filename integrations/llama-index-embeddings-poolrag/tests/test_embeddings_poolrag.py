"""PoolragEmbedding: every sync/async LlamaIndex method gives the engine's vectors, embed_batch_size
batches for real, prompts, Matryoshka dimensions, remote mode and bad input."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest
from llama_index.embeddings.poolrag import PoolragEmbedding
from llama_index.embeddings.poolrag.base import default_query_instruction

from poolrag import (
    Engine,
    InputTooLongError,
    InputTypeError,
    InvalidInputError,
)
from poolrag.cache import EmbeddingCache
from poolrag.client import PoolragClient, RemoteError
from poolrag.errors import InvalidTextError
from poolrag.testing.partner_fixtures import DOC, QUERY, loop_turns_until_done
from poolrag.testing.rag_corpus import API_KEY, TEXTS


def as_array(vectors: list) -> np.ndarray:
    return np.asarray(vectors, dtype=np.float32)


def test_every_method_gives_the_engines_vectors(minilm_engine: Engine) -> None:
    model = PoolragEmbedding(engine=minilm_engine)
    np.testing.assert_array_equal(
        as_array(model.get_query_embedding("ocean")), minilm_engine.embed_array(["ocean"], QUERY)[0]
    )
    np.testing.assert_array_equal(
        as_array(model.get_text_embedding(TEXTS[0])), minilm_engine.embed_array(TEXTS[:1], DOC)[0]
    )
    np.testing.assert_array_equal(
        as_array(model.get_text_embedding_batch(TEXTS)), minilm_engine.embed_array(TEXTS, DOC)
    )
    agg = model.get_agg_embedding_from_queries(["ocean", "sea"])
    np.testing.assert_allclose(
        as_array(agg), minilm_engine.embed_array(["ocean", "sea"], QUERY).mean(axis=0), atol=1e-6
    )


def test_async_methods_equal_sync(minilm_engine: Engine) -> None:
    model = PoolragEmbedding(engine=minilm_engine, embed_batch_size=3)

    async def run() -> tuple:
        return (
            await model.aget_query_embedding("ocean"),
            await model.aget_text_embedding(TEXTS[1]),
            await model.aget_text_embedding_batch(TEXTS),
        )

    query, text, batch = asyncio.run(run())
    assert query == model.get_query_embedding("ocean")
    assert text == model.get_text_embedding(TEXTS[1])
    # Batches run concurrently (worker threads share the CPU), so allow float32 rounding noise.
    np.testing.assert_allclose(batch, model.get_text_embedding_batch(TEXTS), atol=1e-6)


def test_async_embedding_does_not_block_the_event_loop(minilm_engine: Engine) -> None:
    model = PoolragEmbedding(engine=minilm_engine)
    work = model.aget_text_embedding_batch([f"text {i}" for i in range(64)])
    turns, vectors = asyncio.run(loop_turns_until_done(work))
    assert turns >= 1 and len(vectors) == 64


def test_an_async_ingestion_keeps_two_slices_in_the_engine_so_a_query_gets_its_turn(
    minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LlamaIndex starts every embed_batch_size slice at once; the engine takes callers in turn, so a
    query sent during a 79-slice ingestion waited 20.7 s. Two slices at a time keep the engine fed
    and let the query in after about two batches."""
    in_flight, most = 0, 0
    real = minilm_engine.aembed_array

    async def counting(*args: object, **kwargs: object) -> np.ndarray:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await real(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            in_flight -= 1

    monkeypatch.setattr(minilm_engine, "aembed_array", counting)
    model = PoolragEmbedding(engine=minilm_engine, embed_batch_size=8)
    texts = [f"text {i}: {TEXTS[i % len(TEXTS)]}" for i in range(240)]

    async def ingest_and_ask() -> tuple[bool, list[float], list[list[float]]]:
        ingestion = asyncio.ensure_future(model.aget_text_embedding_batch(texts))
        await asyncio.sleep(0.05)
        query = await model.aget_query_embedding("where does the cat sleep?")
        return ingestion.done(), query, await ingestion

    ingestion_was_done, query, vectors = asyncio.run(ingest_and_ask())
    assert most == 3  # two slices, and the query beside them
    assert not ingestion_was_done  # answered while 30 slices were still going
    np.testing.assert_allclose(as_array(vectors), minilm_engine.embed_array(texts, DOC), atol=1e-6)
    np.testing.assert_allclose(
        query, minilm_engine.embed_array(["where does the cat sleep?"], QUERY)[0], atol=1e-6
    )


def test_embed_batch_size_sends_whole_batches_to_the_engine(
    minilm_engine: Engine, engine_calls: list[list[str]]
) -> None:
    texts = [f"text {i}: {TEXTS[i % len(TEXTS)]}" for i in range(10)]
    expected = np.concatenate([minilm_engine.embed_array(texts[i : i + 4], DOC) for i in (0, 4, 8)])
    engine_calls.clear()
    vectors = PoolragEmbedding(engine=minilm_engine, embed_batch_size=4).get_text_embedding_batch(texts)
    assert engine_calls == [texts[0:4], texts[4:8], texts[8:10]]
    np.testing.assert_array_equal(as_array(vectors), expected)

    engine_calls.clear()
    PoolragEmbedding(engine=minilm_engine).get_text_embedding_batch(texts)
    assert engine_calls == [texts]  # the default batch (256) leaves packing to the engine


def test_model_name_loads_in_process_and_batch_size_is_bounded(minilm_path: Path) -> None:
    model = PoolragEmbedding(model_name=str(minilm_path))
    assert isinstance(model.backend, Engine) and model.embed_batch_size == 256
    with pytest.raises(ValueError, match="2048"):
        PoolragEmbedding(model_name=str(minilm_path), embed_batch_size=4096)


def test_input_type_selects_the_models_prompts(prompted_minilm_path: Path, minilm_engine: Engine) -> None:
    model = PoolragEmbedding(model_name=str(prompted_minilm_path))
    text = "capital of France"
    np.testing.assert_allclose(
        as_array(model.get_query_embedding(text)), minilm_engine.embed_array(["query: " + text])[0], atol=1e-6
    )
    np.testing.assert_allclose(
        as_array(model.get_text_embedding(text)),
        minilm_engine.embed_array(["passage: " + text])[0],
        atol=1e-6,
    )


def test_instructions_replace_the_models_prompts_as_in_huggingface_embedding(
    prompted_minilm_path: Path, minilm_engine: Engine, minilm_url: str
) -> None:
    """``query_instruction`` / ``text_instruction`` are put before the text instead of the folder's
    prompts (``""`` puts nothing), in process and over HTTP alike."""
    text = "capital of France"
    model = PoolragEmbedding(
        model_name=str(prompted_minilm_path), query_instruction="Represent this: ", text_instruction=""
    )
    expected_query = minilm_engine.embed_array(["Represent this: " + text])[0]
    np.testing.assert_allclose(as_array(model.get_query_embedding(text)), expected_query, atol=1e-6)
    np.testing.assert_allclose(
        as_array(model.get_text_embedding(text)), minilm_engine.embed_array([text])[0], atol=1e-6
    )
    remote = PoolragEmbedding(base_url=minilm_url, model_name="minilm", query_instruction="Represent this: ")
    np.testing.assert_allclose(as_array(remote.get_query_embedding(text)), expected_query, atol=1e-6)


def test_vectors_are_unit_by_default_as_huggingface_embedding_returns_them(minilm_path: Path) -> None:
    """On a model whose folder does not normalise, ``normalize=True`` (the default, as in
    ``HuggingFaceEmbedding``) gives unit vectors; ``False`` leaves the folder's own."""
    raw = Engine(minilm_path, pooler_config={"normalize": False})
    own = raw.embed_array(TEXTS, DOC)
    assert not np.allclose(np.linalg.norm(own, axis=1), 1.0)
    unit = as_array(PoolragEmbedding(engine=raw).get_text_embedding_batch(TEXTS))
    np.testing.assert_allclose(unit, own / np.linalg.norm(own, axis=1, keepdims=True), atol=1e-6)
    kept = as_array(PoolragEmbedding(engine=raw, normalize=False).get_text_embedding_batch(TEXTS))
    np.testing.assert_array_equal(kept, own)


def test_huggingface_embedding_arguments_run_unchanged(minilm_path: Path, minilm_engine: Engine) -> None:
    """``HuggingFaceEmbedding``'s own arguments, with the class name swapped: engine options,
    ``max_length`` cutting inputs, ``truncate_dim``, and the batching ones that change nothing."""
    model = PoolragEmbedding(
        model_name=str(minilm_path),
        device="cpu",
        trust_remote_code=False,
        max_length=8,
        show_progress_bar=True,
        parallel_process=False,
        embed_batch_size=10,
    )
    assert model.backend.engine_args.device == "cpu"
    long_text = "The ocean covers most of the planet and holds most of its water. " * 4
    cut = minilm_engine.embed_array([long_text], DOC.with_updates(truncate_prompt_tokens=8))[0]
    np.testing.assert_allclose(as_array(model.get_text_embedding(long_text)), cut, atol=1e-6)
    # max_length cuts even where truncate_prompt_tokens=None would refuse
    refusing = PoolragEmbedding(engine=minilm_engine, truncate_prompt_tokens=None, max_length=8)
    np.testing.assert_allclose(as_array(refusing.get_text_embedding(long_text)), cut, atol=1e-6)
    with pytest.raises(ValueError, match="not a Matryoshka model"):
        PoolragEmbedding(engine=minilm_engine, truncate_dim=128)
    # its unset values (device=None, trust_remote_code=False) are no engine options: engine= takes them
    assert (
        PoolragEmbedding(engine=minilm_engine, device=None, trust_remote_code=False).backend is minilm_engine
    )
    # the hub cache folder is the engine's download_dir
    cached = PoolragEmbedding(model_name=str(minilm_path), cache_folder="/tmp/hf-cache")
    assert cached.backend.engine_args.download_dir == "/tmp/hf-cache"
    # a gated model's hub token is the engine's hf_token
    gated = PoolragEmbedding(model_name=str(minilm_path), token="hf_secret")
    assert gated.backend.engine_args.hf_token == "hf_secret"
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        PoolragEmbedding(engine=minilm_engine, cache_dir="/tmp/hf")  # no counterpart: named, refused


def test_the_models_name_may_come_first_as_huggingface_embedding_takes_it(
    minilm_path: Path, minilm_engine: Engine
) -> None:
    """``HuggingFaceEmbedding("BAAI/bge-small-en-v1.5")`` with the class name swapped was a TypeError
    (``BaseModel.__init__() takes 1 positional argument``): the name comes first there too."""
    model = PoolragEmbedding(str(minilm_path), embed_batch_size=4)
    assert model.model_name == str(minilm_path) and model.embed_batch_size == 4
    np.testing.assert_allclose(
        as_array(model.get_query_embedding("ocean")),
        minilm_engine.embed_array(["ocean"], QUERY)[0],
        atol=1e-6,
    )
    assert PoolragEmbedding.from_dict(model.to_dict()).model_name == str(minilm_path)  # keywords still
    with pytest.raises(InputTypeError, match=r"^model_name given twice"):
        PoolragEmbedding(str(minilm_path), model_name=str(minilm_path))


def test_max_length_past_the_folders_length_is_read_as_huggingface_embedding_reads_it(
    minilm_path: Path,
) -> None:
    """It sets the model's max_seq_length: MiniLM's folder says 256 of its 512 positions, and
    max_length=512 reads 512 tokens, as sentence-transformers does then (it stopped at 256)."""
    from sentence_transformers import SentenceTransformer

    long_text = "The ocean covers most of the planet and holds most of its water. " * 40
    model = PoolragEmbedding(model_name=str(minilm_path), max_length=512)
    assert model.backend.facts.max_model_len == 512
    reference = SentenceTransformer(str(minilm_path), device="cpu")
    reference.max_seq_length = 512
    expected = reference.encode([long_text], normalize_embeddings=True)[0]
    np.testing.assert_allclose(as_array(model.get_text_embedding(long_text)), expected, atol=1e-5)


def test_bge_hub_ids_get_the_query_instruction_huggingface_embedding_adds() -> None:
    english = "Represent this question for searching relevant passages: "
    for name in ("BAAI/bge-small-en-v1.5", "BAAI/bge-large-en", "BAAI/bge-base-en-v1.5"):
        assert default_query_instruction(name) == english
    assert default_query_instruction("BAAI/bge-small-zh-v1.5") == "为这个句子生成表示以用于检索相关文章："
    for name in ("BAAI/bge-m3", "sentence-transformers/all-MiniLM-L6-v2", "/models/bge-small-en-v1.5", None):
        assert default_query_instruction(name) is None
    model = PoolragEmbedding(base_url="http://127.0.0.1:9", model_name="BAAI/bge-small-en-v1.5")
    assert model._params("query").prompt == english and model._params("document").prompt is None
    # "" is unset to it (`query_instruction or <the BGE instruction>`): a BGE query still gets it
    bge = PoolragEmbedding(
        base_url="http://127.0.0.1:9", model_name="BAAI/bge-small-en-v1.5", query_instruction=""
    )
    assert bge._params("query").prompt == english
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    assert (
        PoolragEmbedding(base_url="http://127.0.0.1:9", model_name=minilm, query_instruction="")
        ._params("query")
        .prompt
        == ""
    )


def test_dimensions(matryoshka_engine: Engine, minilm_engine: Engine) -> None:
    model = PoolragEmbedding(engine=matryoshka_engine, dimensions=256)
    vectors = as_array(model.get_text_embedding_batch(TEXTS))
    assert vectors.shape == (len(TEXTS), 256)
    np.testing.assert_array_equal(
        vectors, matryoshka_engine.embed_array(TEXTS, DOC.with_updates(dimensions=256))
    )
    with pytest.raises(ValueError, match="not a Matryoshka model"):  # when built, not at the first call
        PoolragEmbedding(engine=minilm_engine, dimensions=256)


def test_remote_equals_in_process(minilm_engine: Engine, minilm_url: str) -> None:
    local = PoolragEmbedding(engine=minilm_engine)
    remote = PoolragEmbedding(base_url=minilm_url, model_name="minilm")
    assert isinstance(remote.backend, PoolragClient)
    assert remote.get_text_embedding_batch(TEXTS) == local.get_text_embedding_batch(TEXTS)
    assert remote.get_query_embedding("ocean") == local.get_query_embedding("ocean")
    np.testing.assert_allclose(
        asyncio.run(remote.aget_text_embedding_batch(TEXTS)), local.get_text_embedding_batch(TEXTS), atol=1e-6
    )
    assert asyncio.run(remote.aget_query_embedding("ocean")) == local.get_query_embedding("ocean")


def test_remote_api_key(keyed_minilm_url: str, minilm_engine: Engine) -> None:
    vector = PoolragEmbedding(base_url=keyed_minilm_url, api_key=API_KEY).get_query_embedding("ocean")
    np.testing.assert_array_equal(as_array(vector), minilm_engine.embed_array(["ocean"], QUERY)[0])
    with pytest.raises(RemoteError):
        PoolragEmbedding(base_url=keyed_minilm_url, api_key="wrong").get_query_embedding("ocean")


def test_a_remote_embedding_is_named_as_its_client_names_the_model(minilm_url: str) -> None:
    """LlamaIndex's embedding events carry ``to_dict()`` and ``Settings.embed_model`` shows its repr,
    both with ``model_name``: one given a client that names its model said ``None``. One given a
    URL alone stays unnamed rather than calling the server at construction."""
    named = PoolragEmbedding(client=PoolragClient(minilm_url, model="minilm"))
    assert named.to_dict()["model_name"] == "minilm"
    assert "model_name='minilm'" in repr(named)
    assert PoolragEmbedding(base_url="http://127.0.0.1:9").model_name is None


def test_to_json_leaves_the_api_key_out_and_from_json_reads_it_from_the_environment(
    keyed_minilm_url: str, minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LlamaIndex's ``to_json`` (a ``json.dumps`` of the fields) used to raise on the key's
    ``SecretStr``; the key is never written out, and ``$POOLRAG_API_KEY`` supplies it on the way back."""
    saved = PoolragEmbedding(base_url=keyed_minilm_url, api_key=API_KEY).to_json()
    assert API_KEY not in saved and keyed_minilm_url in saved
    monkeypatch.setenv("POOLRAG_API_KEY", API_KEY)
    restored = PoolragEmbedding.from_json(saved)
    np.testing.assert_array_equal(
        as_array(restored.get_query_embedding("ocean")), minilm_engine.embed_array(["ocean"], QUERY)[0]
    )


def test_long_and_bad_input(minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    model = PoolragEmbedding(engine=minilm_engine)
    long_text = "word " * 2000
    np.testing.assert_array_equal(
        as_array(model.get_text_embedding(long_text)), minilm_engine.embed_array([long_text], DOC)[0]
    )
    with pytest.raises(InputTooLongError):
        PoolragEmbedding(engine=minilm_engine, truncate_prompt_tokens=None).get_text_embedding(long_text)
    with pytest.raises(InputTypeError):
        model.get_query_embedding(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        model.get_text_embedding_batch(["fine", ""])
    monkeypatch.delenv("POOLRAG_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="which model"):
        PoolragEmbedding()


def test_a_bad_text_is_named_by_its_place_in_the_list_not_in_its_slice(minilm_engine: Engine) -> None:
    """LlamaIndex cuts the list into ``embed_batch_size`` slices before the engine sees any: the blank
    text at place 6 was the third of the second slice and was named ``input[2]``, a text too long at
    place 3 ``input[1]``. A bare string was embedded one character at a time."""
    model = PoolragEmbedding(engine=minilm_engine, embed_batch_size=4)
    texts = [*TEXTS[:6], " ", TEXTS[6]]
    with pytest.raises(InvalidTextError, match=r"^input\[6\] is empty"):
        model.get_text_embedding_batch(texts)
    with pytest.raises(InvalidTextError, match=r"^input\[6\] is empty"):
        asyncio.run(model.aget_text_embedding_batch(texts))
    with pytest.raises(InputTypeError, match="got one string"):
        model.get_text_embedding_batch("ocean")  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="got one string"):
        asyncio.run(model.aget_text_embedding_batch("ocean"))  # type: ignore[arg-type]
    # what only the engine can tell (a text past the model's length) is named so too, also async
    # with num_workers running slices at once
    strict = [PoolragEmbedding(engine=minilm_engine, embed_batch_size=2, truncate_prompt_tokens=None)]
    strict.append(strict[0].model_copy(update={"num_workers": 2, "embed_batch_size": 1}))
    too_long = [*TEXTS[:3], "word " * (minilm_engine.max_model_len + 10), TEXTS[3]]
    for model in strict:
        with pytest.raises(InputTooLongError, match=r"^input\[3\] has \d+ tokens"):
            model.get_text_embedding_batch(too_long)
        with pytest.raises(InputTooLongError, match=r"^input\[3\] has \d+ tokens"):
            asyncio.run(model.aget_text_embedding_batch(too_long))


def test_embedding_cache_serves_unchanged_texts(
    minilm_engine: Engine, engine_calls: list[list[str]], tmp_path: Path
) -> None:
    path = tmp_path / "embeddings.sqlite"
    cold = PoolragEmbedding(engine=minilm_engine, cache=EmbeddingCache(path)).get_text_embedding_batch(TEXTS)
    assert engine_calls == [TEXTS]
    engine_calls.clear()
    warm = PoolragEmbedding(engine=minilm_engine, cache=EmbeddingCache(path))
    assert warm.get_text_embedding_batch(TEXTS) == cold
    assert asyncio.run(warm.aget_text_embedding_batch(TEXTS)) == cold
    assert engine_calls == []
    np.testing.assert_array_equal(as_array(cold), minilm_engine.embed_array(TEXTS, DOC))


def test_a_pickled_embedding_gives_the_same_vectors(minilm_engine: Engine) -> None:
    """What ``IngestionPipeline(num_workers=...)`` does to a transformation: the engine goes along
    as the arguments that made it, and a copy works (no attribute left behind)."""
    import pickle

    model = PoolragEmbedding(engine=minilm_engine, query_instruction="q: ")
    again = pickle.loads(pickle.dumps(model))
    assert again.get_text_embedding_batch(TEXTS) == model.get_text_embedding_batch(TEXTS)
    assert again.get_query_embedding("ocean") == model.get_query_embedding("ocean")


def test_an_ingestion_cache_tells_two_engines_apart(
    minilm_engine: Engine, prompted_minilm_path: Path
) -> None:
    """``IngestionPipeline`` keys its cache on the serialised transformation, which leaves ``engine=``
    out: the model's name stands in for it, so a second model does not get the first one's vectors."""
    from llama_index.core.ingestion import IngestionCache, IngestionPipeline
    from llama_index.core.schema import TextNode

    cache = IngestionCache()

    def ingested(model: PoolragEmbedding) -> np.ndarray:
        pipeline = IngestionPipeline(transformations=[model], cache=cache)
        return as_array([node.embedding for node in pipeline.run(nodes=[TextNode(text=t) for t in TEXTS])])

    first = PoolragEmbedding(engine=minilm_engine)
    second = PoolragEmbedding(engine=Engine(prompted_minilm_path))  # its document prompt moves the vectors
    assert first.model_name == str(minilm_engine.model_name) != second.model_name
    np.testing.assert_array_equal(ingested(first), as_array(first.get_text_embedding_batch(TEXTS)))
    np.testing.assert_array_equal(ingested(second), as_array(second.get_text_embedding_batch(TEXTS)))
    assert not np.allclose(ingested(first), ingested(second), atol=1e-3)


def test_an_ingestion_cache_tells_one_model_pooled_two_ways_apart(minilm_engine: Engine) -> None:
    """The same folder with other engine options (CLS instead of mean pooling) makes other vectors:
    given as ``engine=`` or ``engine_args=``, they are serialised as ``engine_kwargs`` are, so the
    cache misses instead of handing back the first engine's vectors, and ``from_json`` rebuilds them."""
    from llama_index.core.ingestion import IngestionCache, IngestionPipeline
    from llama_index.core.schema import TextNode

    from poolrag import EngineArgs

    cache = IngestionCache()

    def ingested(model: PoolragEmbedding) -> np.ndarray:
        pipeline = IngestionPipeline(transformations=[model], cache=cache)
        return as_array([node.embedding for node in pipeline.run(nodes=[TextNode(text=t) for t in TEXTS])])

    mean = PoolragEmbedding(engine=minilm_engine)
    cls_pooled = {"pooling_type": "CLS"}
    cls = PoolragEmbedding(
        engine_args=EngineArgs(model=minilm_engine.model_name, pooler_config=cls_pooled, hf_token="hf_x")
    )
    ingested(mean)
    np.testing.assert_array_equal(ingested(cls), as_array(cls.get_text_embedding_batch(TEXTS)))
    assert "hf_x" not in cls.to_json()
    again = PoolragEmbedding.from_json(cls.to_json())
    assert again.get_text_embedding_batch(TEXTS) == cls.get_text_embedding_batch(TEXTS)


# -- progress ------------------------------------------------------------------------------------------------
def _drawn(stderr: str, total: int) -> list[int]:
    """The counts LlamaIndex's bar drew out of ``total`` (``"Generating embeddings: ... 100/300"``)."""
    return [
        int(n)
        for n in re.findall(rf"Generating embeddings: .*?\b(\d+)/{total}\b", stderr.replace("\r", "\n"))
    ]


@pytest.mark.parametrize(
    ("setting", "call"), [({"show_progress_bar": True}, {}), ({}, {"show_progress": True})]
)
def test_show_progress_draws_llamaindex_bar_on_stderr(
    minilm_engine: Engine, capsys: pytest.CaptureFixture[str], setting: dict, call: dict
) -> None:
    """HuggingFaceEmbedding's show_progress_bar, and get_text_embedding_batch's show_progress (the base
    class's bar, which this class does not bypass): the right total from the start, over texts
    (sync) or slices (async, as each slice comes back), and the same vectors."""
    texts = [f"document number {i} about topic {i % 7}" for i in range(300)]
    model = PoolragEmbedding(engine=minilm_engine, embed_batch_size=100, **setting)
    vectors = model.get_text_embedding_batch(texts, **call)
    drawn = _drawn(capsys.readouterr().err, 300)
    assert drawn[0] == 0 and drawn[-1] == 300 and drawn == sorted(drawn)
    np.testing.assert_allclose(as_array(vectors), minilm_engine.embed_array(texts, DOC), atol=1e-6)
    asyncio.run(model.aget_text_embedding_batch(texts, **call))
    drawn = _drawn(capsys.readouterr().err, 3)
    assert drawn[0] == 0 and drawn[-1] == 3


def test_without_show_progress_nothing_is_drawn(
    minilm_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    model = PoolragEmbedding(engine=minilm_engine, embed_batch_size=100)
    texts = [f"document number {i}" for i in range(300)]
    model.get_text_embedding_batch(texts)
    asyncio.run(model.aget_text_embedding_batch(texts))
    assert capsys.readouterr().err == ""


def test_a_batch_call_is_one_instrumentation_span_as_in_huggingface_embedding(minilm_engine: Engine) -> None:
    """LlamaIndex spans ``get_text_embedding_batch`` and, through its DispatcherSpanMixin, this
    class's override of it; the override used to call the spanned base, so each call showed as two
    nested spans of the same name (two embedding steps in a tracer, one of them empty) where
    ``HuggingFaceEmbedding`` shows one, with the embedding events inside it."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    model = PoolragEmbedding(engine=minilm_engine, embed_batch_size=2)
    spans = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(spans)
    try:
        model.get_text_embedding_batch(TEXTS[:3])
        asyncio.run(model.aget_text_embedding_batch(TEXTS[:3]))
    finally:
        root.span_handlers.remove(spans)
    names = [span.id_.split("-")[0] for span in spans.completed_spans]
    assert names == [
        "PoolragEmbedding.get_text_embedding_batch",
        "PoolragEmbedding.aget_text_embedding_batch",
    ]
