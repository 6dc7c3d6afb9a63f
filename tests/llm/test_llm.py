"""``poolrag.LLM``: vLLM's offline pooling calls, as its docs write them, give the Engine's answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from poolrag import LLM, Engine, ModelLoadError, PoolerConfig, PoolingParams
from poolrag.errors import InputTooLongError, InputTypeError, InvalidInputError, UnsupportedTaskError
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import SENTENCES


@pytest.fixture(scope="module")
def llm(minilm_path: Path) -> LLM:
    return LLM(str(minilm_path), runner="pooling", convert="embed")


def test_llm_is_a_public_name() -> None:
    import poolrag

    assert "LLM" in poolrag.__all__ and poolrag.LLM is LLM


def test_what_llm_returns_is_importable_under_vllms_names(llm: LLM) -> None:
    """``from vllm import LLM, EmbeddingRequestOutput`` ports by changing the package; vLLM's
    ``PoolingRequestOutput`` is ``poolrag.llm``'s (``poolrag.PoolingRequestOutput`` is the Engine's)."""
    import poolrag
    import poolrag.llm

    embedded, scored = llm.embed("a cat")[0], llm.score("a cat", "a dog")[0]
    assert isinstance(embedded, poolrag.EmbeddingRequestOutput)
    assert isinstance(embedded, poolrag.llm.PoolingRequestOutput)
    assert isinstance(scored, poolrag.ScoringRequestOutput)
    assert isinstance(llm.encode("a cat", pooling_task="embed")[0], poolrag.llm.PoolingRequestOutput)


def test_a_vllm_script_ports_by_one_import(llm: LLM) -> None:
    """``from vllm import ...`` becomes ``from poolrag.vllm import ...``: every name is the one
    ``LLM`` takes or returns, so isinstance checks and ``from_base`` conversions hold (seen from
    outside: ``poolrag.PoolingRequestOutput`` is the Engine's class, and the check failed)."""
    import poolrag.vllm as vllm

    assert vllm.LLM is LLM and vllm.PoolingParams is PoolingParams
    embedded = llm.embed("a cat", vllm.PoolingParams(normalize=True))[0]
    assert isinstance(embedded, vllm.EmbeddingRequestOutput) and isinstance(
        embedded, vllm.PoolingRequestOutput
    )
    assert isinstance(embedded.outputs, vllm.EmbeddingOutput)
    assert isinstance(llm.score("a cat", "a dog")[0].outputs, vllm.ScoringOutput)
    raw = llm.encode("a cat", pooling_task="embed")[0]
    assert isinstance(raw, vllm.PoolingRequestOutput) and isinstance(raw.outputs, vllm.PoolingOutput)
    converted = vllm.EmbeddingRequestOutput.from_base(raw)
    assert isinstance(converted, vllm.EmbeddingRequestOutput) and converted.request_id == raw.request_id
    assert converted.outputs.embedding == pytest.approx(embedded.outputs.embedding, abs=1e-6)
    tokens = llm.encode("a cat", pooling_task="token_embed")[0]
    with pytest.raises(ValueError, match="1-D embedding vector, not of shape"):
        vllm.EmbeddingRequestOutput.from_base(tokens)
    assert set(vllm.__all__) >= {"LLM", "PoolingParams", "TokensPrompt", "TextPrompt", "EngineArgs"}


def test_what_vllm_scripts_read_from_the_llm(llm: LLM, minilm_engine: Engine) -> None:
    assert llm.llm_engine.get_supported_tasks() == llm.supported_tasks
    config = llm.model_config
    assert (config.runner_type, config.is_cross_encoder, config.get_hidden_size()) == ("pooling", False, 384)
    assert config.pooler_config == minilm_engine.pooler_config
    # what scripts log or pick sizes from (llm.llm_engine.model_config.dtype was an AttributeError)
    engine_config = llm.llm_engine.model_config
    assert (engine_config.dtype, engine_config.quantization) == (torch.float32, None)
    assert (engine_config.is_matryoshka, engine_config.matryoshka_dimensions) == (False, None)
    assert (config.architecture, config.get_vocab_size()) == ("BertModel", 30522)
    assert config.served_model_name == config.model
    assert llm.llm_engine.get_tokenizer() is llm.get_tokenizer()
    params = PoolingParams(dimensions=None, normalize=False)
    twin = params.clone()
    assert twin == params and twin is not params
    with pytest.raises(ValueError, match=r"LLM.generate\(\) needs a generative model"):
        llm.generate("Hello, my name is")
    with pytest.raises(ValueError, match="pooling models only"):
        llm.chat([{"role": "user", "content": "hi"}])


def test_model_config_names_the_matryoshka_sizes_vllm_scripts_pick_from(minilm_path: Path) -> None:
    llm = LLM(str(minilm_path), hf_overrides={"is_matryoshka": True, "matryoshka_dimensions": [64, 128]})
    config = llm.llm_engine.vllm_config.model_config
    assert (config.is_matryoshka, config.matryoshka_dimensions) == (True, [64, 128])
    size = config.matryoshka_dimensions[0]
    assert len(llm.embed("a cat", PoolingParams(dimensions=size))[0].outputs.embedding) == size


def test_model_config_embedding_size_is_the_size_of_the_vectors_returned(
    llm: LLM, assets: Path, tiny_model: Callable[..., Path]
) -> None:
    """vLLM's own embedding tests size their checks by ``llm.model_config.embedding_size`` (seen
    from outside: an AttributeError): the vector the model returns, after a sentence-transformers
    ``Dense`` layer when the folder has one, else the hidden size."""
    assert llm.model_config.embedding_size == len(llm.embed("a cat")[0].outputs.embedding) == 384
    colbert = LLM(str(assets / "colbert-pylate"))
    (tokens,) = colbert.encode("a cat", pooling_task="token_embed")
    assert colbert.model_config.embedding_size == tokens.outputs.data.shape[1] == 96
    classifier = LLM(str(tiny_model("bert", head="sequence", num_labels=3)))
    assert classifier.model_config.embedding_size == classifier.model_config.get_hidden_size()


def test_embed_score_and_encode_match_the_engine(llm: LLM, minilm_engine: Engine) -> None:
    got = llm.embed(SENTENCES)
    want = minilm_engine.embed(SENTENCES)
    np.testing.assert_allclose(
        [o.outputs.embedding for o in got], [o.outputs.embedding for o in want], rtol=1e-5, atol=1e-6
    )
    assert [o.prompt_token_ids for o in got] == [o.prompt_token_ids for o in want]
    scores = llm.score("What is pooling?", SENTENCES[:3])
    assert [s.outputs.score for s in scores] == pytest.approx(
        [s.outputs.score for s in minilm_engine.score("What is pooling?", SENTENCES[:3])], abs=1e-6
    )
    tokens = llm.encode(SENTENCES[:2], pooling_task="token_embed")
    assert [o.outputs.data.shape[0] for o in tokens] == [len(o.prompt_token_ids) for o in tokens]


def test_a_vllm_example_built_on_engine_args_add_cli_args_runs(
    minilm_path: Path, minilm_engine: Engine
) -> None:
    """vLLM's offline examples: add_cli_args returns the parser, set_defaults names the model and
    LLM(**vars(args)) takes every name the flags set (seen from outside: an argument group came back,
    --model/--runner did not exist and LLM refused auto_truncate/autotune)."""
    import argparse

    from poolrag import EngineArgs

    parser = EngineArgs.add_cli_args(argparse.ArgumentParser())
    parser.set_defaults(model=str(minilm_path), runner="pooling", enforce_eager=True)
    llm = LLM(**vars(parser.parse_args(["--max-model-len", "128"])))
    got = np.stack([o.outputs.embedding for o in llm.embed(SENTENCES)])
    np.testing.assert_allclose(got, minilm_engine.embed_array(SENTENCES), atol=1e-6)
    chosen = llm.engine_args
    assert (chosen.max_model_len, chosen.compile, chosen.truncate) == (128, "off", False)  # as LLM(model)


def test_vllm_call_keywords(llm: LLM) -> None:
    out = llm.embed(SENTENCES[3], truncate_prompt_tokens=5, use_tqdm=False)
    assert len(out[0].prompt_token_ids) == 5
    refusing = PoolingParams(truncate=False)  # the call's keyword asks for the cut: it wins
    out = llm.embed(SENTENCES[3], pooling_params=refusing, truncate_prompt_tokens=5, use_tqdm=False)
    assert len(out[0].prompt_token_ids) == 5
    with pytest.raises(InvalidInputError, match="LoRA"):
        llm.embed("hi", lora_request=object())
    with pytest.raises(InvalidInputError, match="pooling_task"):
        llm.encode("hi")
    with pytest.raises(UnsupportedTaskError):
        llm.encode("hi", pooling_task="classify")
    with pytest.raises(InputTypeError, match="one PoolingParams for all its pairs"):  # was an AttributeError
        llm.score("a", ["b", "c"], pooling_params=[PoolingParams(), PoolingParams()])


def test_a_cut_over_the_models_length_is_refused_as_vllm_refuses_it(llm: LLM, minilm_engine: Engine) -> None:
    """vLLM's ``LLM`` raises ValueError for ``truncate_prompt_tokens`` over ``max_model_len``, given
    as a keyword or in the PoolingParams; poolrag's own Engine cuts at the model's length instead."""
    longest = minilm_engine.facts.max_model_len
    said = (
        f"truncate_prompt_tokens value ({longest + 1}) is greater than max_model_len ({longest}). "
        "Please, select a smaller truncation size."
    )
    for call in (
        lambda: llm.embed("hi", truncate_prompt_tokens=longest + 1),
        lambda: llm.embed("hi", pooling_params=PoolingParams(truncate_prompt_tokens=longest + 1)),
        lambda: llm.score("hi", "there", truncate_prompt_tokens=longest + 1),
        lambda: llm.encode(["hi"], pooling_task="token_embed", truncate_prompt_tokens=longest + 1),
    ):
        with pytest.raises(ValueError) as caught:
            call()
        assert str(caught.value) == said and caught.value.param == "truncate_prompt_tokens"
    assert len(llm.embed("word " * 10, truncate_prompt_tokens=longest)[0].prompt_token_ids) == 12
    long_text = "word " * (longest + 40)
    (capped,) = minilm_engine.embed([long_text], PoolingParams(truncate_prompt_tokens=longest + 1))
    assert len(capped.prompt_token_ids) == longest


@pytest.mark.parametrize(
    "pooler_config",
    [
        '{"pooling_type": "CLS", "normalize": false}',
        {"pooling_type": "CLS", "normalize": False},
    ],
)
def test_pooler_config_as_the_docs_write_it(minilm_path: Path, pooler_config: object) -> None:
    llm = LLM(str(minilm_path), pooler_config=pooler_config)
    engine = Engine(minilm_path, pooler_config=json.dumps({"pooling_type": "CLS", "normalize": False}))
    assert llm.engine.pooler_config == engine.pooler_config
    assert engine.pooler_config.pooling_type == "CLS" and engine.pooler_config.normalize is False
    vector = llm.embed("hello world")[0].outputs.embedding
    assert abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3  # not normalised, as asked


def test_pooler_config_in_vllm_0_32s_spelling(minilm_path: Path, minilm_engine: Engine) -> None:
    """vLLM 0.32 splits ``pooling_type`` into ``seq_pooling_type`` / ``tok_pooling_type`` and calls an
    embedding model's normalisation ``use_activation`` (it refuses ``normalize``)."""
    raw = LLM(str(minilm_path), pooler_config={"use_activation": False})
    assert raw.engine.pooler_config.normalize is False and not raw.engine.facts.normalizes_embeddings
    unit = np.array(minilm_engine.embed_array(["hello world"])[0])
    vector = np.array(raw.embed("hello world")[0].outputs.embedding)
    np.testing.assert_allclose(vector / np.linalg.norm(vector), unit, rtol=0, atol=1e-6)
    assert abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3
    cls = LLM(str(minilm_path), pooler_config={"seq_pooling_type": "CLS", "tok_pooling_type": "ALL"})
    assert cls.engine.pooler_config.pooling_type == "CLS"
    # a token method alone is the model's method (a reward model's per-token rows), so an embedder refuses it
    assert PoolerConfig.from_value({"tok_pooling_type": "all"}).pooling_type == "ALL"
    with pytest.raises(ModelLoadError, match="pooling_type ALL cannot produce one embedding per text"):
        Engine(minilm_path, pooler_config={"tok_pooling_type": "ALL"})
    kernel = LLM(str(minilm_path), pooler_config={"enable_flash_late_interaction": False})  # a CUDA kernel
    assert kernel.engine.pooler_config == minilm_engine.pooler_config
    for bad, message in (
        ({"seq_pooling_type": "CLS", "pooling_type": "MEAN"}, "names two pooling methods"),
        ({"use_activation": False, "normalize": True}, "normalize and use_activation disagree"),
        ({"tok_pooling_type": "FIRST"}, "unknown tok_pooling_type 'FIRST'"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            Engine(minilm_path, pooler_config=bad)


def test_invalid_pooler_config_text_is_a_clear_error(minilm_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="pooler_config is not valid JSON"):
        Engine(minilm_path, pooler_config="{pooling_type: CLS}")
    with pytest.raises(InvalidInputError, match="JSON object"):
        Engine(minilm_path, pooler_config="[1, 2]")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runner": "generate"}, "pooling models only"),
        ({"runner": "draft"}, "runner must be one of"),
        ({"convert": "mm_encoder_only"}, "convert must be one of"),
        ({"tensor_parallel_size": 2}, "device_map='auto'"),
    ],
)
def test_what_poolrag_cannot_do_is_refused(minilm_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        LLM(str(minilm_path), **kwargs)


def test_scheduler_options_are_ignored_and_unknown_ones_refused(minilm_path: Path) -> None:
    llm = LLM(
        str(minilm_path),
        enforce_eager=True,
        gpu_memory_utilization=0.5,
        seed=0,
        max_num_batched_tokens=2048,
        tensor_parallel_size=1,
    )
    assert internals.batcher(llm.engine).max_batch_tokens == 2048
    with pytest.raises(TypeError, match="unknown options"):
        LLM(str(minilm_path), speculative_config={})


def test_classify_and_reward_on_encoders(tiny_model: Callable[..., Path]) -> None:
    classifier = LLM(str(tiny_model("bert", head="sequence", num_labels=3)), convert="classify")
    probs = classifier.classify(SENTENCES[:2])
    engine = Engine(tiny_model("bert", head="sequence", num_labels=3))
    np.testing.assert_allclose(
        [p.outputs.probs for p in probs], [p.outputs.probs for p in engine.classify(SENTENCES[:2])], atol=1e-6
    )
    # vLLM's table: convert="classify" adds the head on every token (tests/loading has the parity)
    rows = classifier.encode(SENTENCES[:1], pooling_task="token_classify")[0]
    assert np.asarray(rows.outputs.data).shape == (len(rows.prompt_token_ids), 3)
    # vLLM's LLM.reward on a token classifier: one row per token, the token_classify rows
    tagger = LLM(str(tiny_model("bert", head="token", num_labels=2)), convert="reward")
    rewards = tagger.reward(SENTENCES[:2])
    per_token = tagger.engine.token_classify(SENTENCES[:2])
    for reward, tokens in zip(rewards, per_token, strict=True):
        assert reward.outputs.data.shape == (len(reward.prompt_token_ids), 2)
        np.testing.assert_allclose(reward.outputs.data, tokens.outputs.data, atol=1e-6)


def test_vllms_ner_example_reads_the_labels_where_it_reads_them(tiny_model: Callable[..., Path]) -> None:
    """examples/pooling/token_classify/ner.py: labels from llm.llm_engine.vllm_config.model_config
    .hf_config.id2label, a label per token from token_classify (seen from outside: AttributeError)."""
    import transformers

    folder = tiny_model("bert", head="token", num_labels=3)
    llm = LLM(model=str(folder), runner="pooling")
    label_map = llm.llm_engine.vllm_config.model_config.hf_config.id2label
    assert label_map == transformers.AutoConfig.from_pretrained(folder).id2label
    assert llm.model_config.hf_config is llm.llm_engine.model_config.hf_config
    (output,) = llm.encode(SENTENCES[:1], pooling_task="token_classify")
    labels = [label_map[int(i)] for i in output.outputs.data.argmax(dim=-1)]
    assert len(labels) == len(output.prompt_token_ids) and set(labels) <= set(label_map.values())
    assert llm.model_config.max_model_len == llm.engine.max_model_len


def test_reward_on_a_token_classifier_through_the_engine(tiny_model: Callable[..., Path]) -> None:
    engine = Engine(tiny_model("bert", head="token", num_labels=2))
    assert "reward" in engine.supported_tasks
    out = engine.reward("a few words here", PoolingParams(use_activation=False))[0]
    assert out.outputs.data.shape == (len(out.prompt_token_ids), 2)


def test_pooler_config_task_token_embed_scores_by_late_interaction(
    minilm_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """vLLM's multi-vector example: BGE-M3 with ``PoolerConfig(task="token_embed")`` scores by
    MaxSim over the token vectors (vLLM's late interaction); without it by cosine of the dense
    vectors. The task changes no vector, so the outputs' fingerprint stays."""
    from poolrag.scoring.similarity import maxsim
    from poolrag.testing.tiny_models import build_bge_m3
    from poolrag.vllm import PoolerConfig as VllmPoolerConfig

    folder = build_bge_m3(tmp_path_factory.mktemp("m3"), minilm_path)
    llm = LLM(str(folder), runner="pooling", pooler_config=VllmPoolerConfig(task="token_embed"))
    plain = LLM(str(folder), runner="pooling")
    query, docs = "the capital of France", ["Paris is in France.", "Bananas are yellow."]
    q = llm.encode(query, pooling_task="token_embed")[0].outputs.data.numpy()
    d = [out.outputs.data.numpy() for out in llm.encode(docs, pooling_task="token_embed")]
    scores = [s.outputs.score for s in llm.score(query, docs)]
    np.testing.assert_allclose(scores, [maxsim(q, x) for x in d], rtol=1e-5)
    dense = [np.array(o.outputs.embedding) for o in plain.embed([query, *docs])]
    np.testing.assert_allclose(
        [s.outputs.score for s in plain.score(query, docs)],
        [float(dense[0] @ x) for x in dense[1:]],
        rtol=1e-5,
    )
    assert llm.engine.facts.output_fingerprint == plain.engine.facts.output_fingerprint
    assert llm.engine.task == "token_embed" and llm.model_config.pooler_config.task == "token_embed"


def test_a_pooler_config_task_the_model_does_not_run_is_refused(
    minilm_path: Path, tiny_model: Callable[..., Path]
) -> None:
    with pytest.raises(ModelLoadError, match="pooler_config task 'classify' is not one this model runs"):
        LLM(str(minilm_path), pooler_config={"task": "classify"})
    # vLLM's token_classify test pools a sequence classifier this way; here its head runs on every
    # token with convert='classify', and the refusal says so (seen from outside: it named no way)
    classifier = str(tiny_model("bert", head="sequence", num_labels=2))
    with pytest.raises(ModelLoadError, match="load it with convert='classify'"):
        LLM(classifier, pooler_config={"task": "token_classify"})
    converted = LLM(classifier, convert="classify", pooler_config={"task": "token_classify"})
    (output,) = converted.encode("a cat", pooling_task="token_classify")
    assert tuple(output.outputs.data.shape) == (len(output.prompt_token_ids), 2)
    with pytest.raises(InvalidInputError, match="task 'embed' and pooler_config task 'token_embed' disagree"):
        Engine(minilm_path, task="embed", pooler_config={"task": "token_embed"})


def test_late_chunking_params_average_each_chunks_token_vectors(minilm_path: Path) -> None:
    """vLLM's examples/pooling/token_embed/late_chunking_offline.py: ``PoolingParams(
    late_chunking_params=LateChunkingParams(n))`` on ``encode(pooling_task="token_embed")`` gives one
    vector per n tokens (special tokens included), the mean of the raw token vectors, normalised
    unless ``use_activation=False``, with each chunk's token and character ranges."""
    from poolrag.vllm import LateChunkingMetadata, LateChunkingParams

    llm = LLM(str(minilm_path), pooler_config={"task": "token_embed"})
    text = "Berlin is the capital of Germany. The city has many museums."
    raw = llm.encode(text, pooling_task="token_embed", pooling_params=PoolingParams(use_activation=False))[0]
    chunked, plain, unnormalised = llm.encode(
        [text] * 3,
        pooling_task="token_embed",
        pooling_params=[
            PoolingParams(late_chunking_params=LateChunkingParams(3)),
            PoolingParams(),
            PoolingParams(late_chunking_params=LateChunkingParams(3), use_activation=False),
        ],
    )
    rows = raw.outputs.data.numpy()
    means = np.stack([rows[i : i + 3].mean(0) for i in range(0, len(rows), 3)])
    np.testing.assert_allclose(unnormalised.outputs.data.numpy(), means, rtol=1e-5, atol=1e-6)
    unit = means / np.linalg.norm(means, axis=-1, keepdims=True)
    np.testing.assert_allclose(chunked.outputs.data.numpy(), unit, rtol=1e-5, atol=1e-6)
    assert plain.late_chunking is None and plain.outputs.data.shape[0] == len(raw.prompt_token_ids)
    metadata = chunked.late_chunking
    assert isinstance(metadata, LateChunkingMetadata) and metadata.input_tokens == len(
        chunked.prompt_token_ids
    )
    offsets = llm.get_tokenizer()(text, return_offsets_mapping=True)["offset_mapping"]
    assert metadata.chunks[0].token_range == (0, 3) and metadata.chunks[0].char_range == (0, offsets[2][1])
    start, end = metadata.chunks[-1].char_range
    assert text[start:end] == text[offsets[metadata.chunks[-1].token_range[0]][0] : offsets[-2][1]]


def test_late_chunked_and_plain_prompts_are_numbered_in_the_prompts_order(minilm_path: Path) -> None:
    """A call mixing late-chunked and plain ``token_embed`` prompts numbers its results in the
    prompts' order and from where the LLM's count stood, as vLLM numbers every call (its outputs
    sorted by request id are the prompts' order); each group used to take ids as it ran, so the
    plain prompt between two chunked ones came back as request "2" after "0" and before "1"."""
    from poolrag.vllm import LateChunkingParams

    llm = LLM(str(minilm_path))
    late = PoolingParams(late_chunking_params=LateChunkingParams(2))
    assert llm.embed("a first call")[0].request_id == "0"
    outputs = llm.encode(
        ["alpha beta gamma delta", "one two three", "x y z w v"],
        pooling_task="token_embed",
        pooling_params=[late, PoolingParams(), late],
    )
    assert [o.request_id for o in outputs] == ["1", "2", "3"]
    assert [o.late_chunking is not None for o in outputs] == [True, False, True]
    assert llm.embed("the next call")[0].request_id == "4"


def test_late_chunking_params_are_refused_where_they_cannot_apply(
    minilm_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from poolrag.testing.tiny_models import build_bge_m3
    from poolrag.vllm import LateChunkingParams

    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(InvalidInputError, match="positive integer"):
            LateChunkingParams(bad)  # type: ignore[arg-type]
    late = PoolingParams(late_chunking_params=LateChunkingParams(4))
    llm = LLM(str(minilm_path))
    with pytest.raises(InvalidInputError, match="applies to pooling_task='token_embed'"):
        llm.encode("a text", pooling_task="embed", pooling_params=late)
    with pytest.raises(InvalidInputError, match="truncation is refused"):
        llm.encode("a text", pooling_task="token_embed", pooling_params=late, truncate_prompt_tokens=4)
    for cut in (4, -1):  # in the params too: it said the folder added a prompt
        cut_late = PoolingParams(late_chunking_params=LateChunkingParams(4), truncate_prompt_tokens=cut)
        with pytest.raises(InvalidInputError, match="truncation is refused"):
            llm.encode("a longer text here", pooling_task="token_embed", pooling_params=cut_late)
    with pytest.raises(InputTooLongError, match=r"input\[0\] has 602 tokens.*split it into texts") as long:
        llm.encode("word " * 600, pooling_task="token_embed", pooling_params=late)
    assert "truncate_prompt_tokens" not in str(long.value)  # the usual remedy, refused here
    with pytest.raises(InputTypeError, match="reads a text prompt"):
        llm.encode({"prompt_token_ids": [101, 1037, 102]}, pooling_task="token_embed", pooling_params=late)
    with pytest.raises(InvalidInputError, match="late_chunking_params is vLLM's late chunking"):
        llm.engine.encode("a text", "token_embed", late)  # the Engine late-chunks by character spans
    m3 = LLM(str(build_bge_m3(tmp_path_factory.mktemp("m3-late"), minilm_path)))
    with pytest.raises(InvalidInputError, match="one vector per token"):  # its token_embed drops the first
        m3.encode("a text", pooling_task="token_embed", pooling_params=late)
