"""``poolrag.LLM`` takes vLLM 0.32's spellings of a call's inputs: text and token prompt shapes,
``tokenization_kwargs`` (its only way to truncate) and one ``PoolingParams`` per prompt; what it
cannot honour is refused in one line naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poolrag import LLM, Engine, PoolingParams, TextPrompt, TokensPrompt
from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.testing.tiny_models import SENTENCES


@pytest.fixture(scope="module")
def llm(minilm_path: Path) -> LLM:
    return LLM(str(minilm_path), runner="pooling")


def _vectors(outputs: list) -> np.ndarray:
    return np.array([o.outputs.embedding for o in outputs])


def test_every_prompt_shape_vllm_takes_gives_the_texts_vectors(llm: LLM, minilm_engine: Engine) -> None:
    text = SENTENCES[0]
    ids = minilm_engine.tokenize(text)
    want = minilm_engine.embed_array([text])
    for prompts in (
        text,
        {"prompt": text},  # vLLM's TextPrompt
        ids,  # a bare list of ids is one token prompt
        [ids],
        {"prompt_token_ids": ids},
        [{"prompt": text}],
        TextPrompt(prompt=text),  # vLLM's names, importable from poolrag
        TokensPrompt(prompt_token_ids=ids),
        {"prompt": text, "cache_salt": "tenant-a"},  # steers vLLM's prefix cache only: no result changes
        {"prompt_token_ids": ids, "cache_salt": "tenant-a"},
        TokensPrompt(prompt_token_ids=ids, prompt=text),  # vLLM's label of the ids: the ids are pooled
    ):
        got = _vectors(llm.embed(prompts))
        assert got.shape == (1, 384), prompts
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    mixed = llm.embed([SENTENCES[1], {"prompt": SENTENCES[2]}, minilm_engine.tokenize(SENTENCES[3])])
    np.testing.assert_allclose(_vectors(mixed), minilm_engine.embed_array(SENTENCES[1:4]), rtol=0, atol=1e-6)


def test_score_takes_text_prompts_on_either_side(llm: LLM, minilm_engine: Engine) -> None:
    want = [out.outputs.score for out in minilm_engine.score(SENTENCES[0], SENTENCES[1:3])]
    for first, second in (
        ({"prompt": SENTENCES[0]}, SENTENCES[1:3]),
        (SENTENCES[0], [{"prompt": SENTENCES[1]}, {"prompt": SENTENCES[2]}]),
    ):
        got = [out.outputs.score for out in llm.score(first, second)]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    with pytest.raises(InputTypeError, match=r"text_2\[0\] must be a text or an image"):
        llm.score(SENTENCES[0], [{"prompt": 7}])


def test_score_content_dicts_are_one_item_each_as_in_vllm(llm: LLM, minilm_engine: Engine) -> None:
    """vLLM's ``ScoreMultiModalParam``: one ``{"content": [parts]}`` is one query or document, a list
    of them several (vLLM's vision_reranker_offline.py). A list of them was passed through as dicts
    and refused, and one dict of several parts gave one score per part where vLLM gives one."""

    def part(text: str) -> dict:
        return {"content": [{"type": "text", "text": text}]}

    want = [out.outputs.score for out in minilm_engine.score(SENTENCES[0], SENTENCES[1:3])]
    listed = llm.score(SENTENCES[0], [part(SENTENCES[1]), SENTENCES[2]])
    np.testing.assert_allclose([o.outputs.score for o in listed], want, rtol=0, atol=1e-6)
    (one,) = llm.score(part(SENTENCES[0]), part(SENTENCES[1]))
    assert one.outputs.score == pytest.approx(want[0], abs=1e-6)
    fused = {"content": [{"type": "text", "text": SENTENCES[1]}, {"type": "text", "text": SENTENCES[2]}]}
    with pytest.raises(InvalidInputError, match="content has 2 parts, which vLLM fuses into one input"):
        llm.score(SENTENCES[0], fused)


def test_score_content_reads_vllm_s_input_text_part(llm: LLM, minilm_engine: Engine) -> None:
    """vLLM reads a score content's parts as chat parts, the Responses API's ``input_text`` among
    them; it was refused ('expected a text or image_url part')."""
    want = [out.outputs.score for out in minilm_engine.score(SENTENCES[0], SENTENCES[1:2])]
    item = {"content": [{"type": "input_text", "text": SENTENCES[1]}]}
    (one,) = llm.score(SENTENCES[0], item)
    assert one.outputs.score == pytest.approx(want[0], abs=1e-6)


def test_prompt_shapes_it_cannot_take_are_refused_by_name(llm: LLM) -> None:
    # a multimodal prompt is an image alone (a dual encoder's; tests/engine/test_dual_encoder.py)
    with pytest.raises(InvalidInputError, match="a prompt is a text or an image"):
        llm.embed({"prompt": "a cat", "multi_modal_data": {"image": None}})
    with pytest.raises(InputTypeError, match="this model reads text only"):
        llm.embed({"prompt": "", "multi_modal_data": {"image": b"\x89PNG"}})
    with pytest.raises(InputTypeError, match="'prompt' must be a string, not int"):
        llm.embed({"prompt": 7})
    # vLLM's plugin prompt, and a dict with neither text nor ids, were 'prompt_token_ids must be a list'
    with pytest.raises(InvalidInputError, match="'data' prompt is for vLLM's IO processor plugins"):
        llm.encode({"data": {"x": 1}}, pooling_task="embed")
    with pytest.raises(InputTypeError, match=r"'prompt' \(text\) or 'prompt_token_ids', not only \['text'\]"):
        llm.embed([{"text": "a cat"}])
    with pytest.raises(InputTypeError, match=r"token prompt's 'prompt' .* must be a string, not int"):
        llm.embed({"prompt_token_ids": [101, 2000, 102], "prompt": 7})
    with pytest.raises(
        InvalidInputError, match=r"token prompt keys \['multi_modal_data'\] are not supported"
    ):
        llm.embed({"prompt_token_ids": [101, 2000, 102], "multi_modal_data": {"image": None}})


def test_an_empty_token_prompt_in_a_list_is_refused_as_empty(llm: LLM) -> None:
    """vLLM reads ``[]`` in a list of prompts as an empty token prompt and refuses it with a
    ``ValueError`` ("prompt cannot be empty"); it was a ``TypeError`` saying a list may not be a
    prompt, when a list of ids is one. A bare ``[]`` is still no prompts at all, as in vLLM."""
    for prompts in ([[101, 2000, 102], []], [SENTENCES[0], ()], [{"prompt_token_ids": []}]):
        with pytest.raises(InvalidInputError, match=r"input\[\d\] is empty \(no token ids\)") as refused:
            llm.embed(prompts)
        assert isinstance(refused.value, ValueError)
    assert llm.embed([]) == []


def test_tokenization_kwargs_truncate_as_in_vllm(llm: LLM, minilm_engine: Engine) -> None:
    long_text = "retrieval " * 300  # 302 tokens, over MiniLM's 256
    for kwargs, length in (
        ({"truncate_prompt_tokens": 12}, 12),
        ({"truncation": True, "max_length": 20}, 20),
        ({"truncation": True}, 256),  # the model's maximum
        ({"truncate_prompt_tokens": -1}, 256),
        ({"truncation": "longest_first", "max_length": 9, "add_special_tokens": True}, 9),
    ):
        (out,) = llm.embed(long_text, tokenization_kwargs=kwargs)
        assert len(out.prompt_token_ids) == length, kwargs
    (cut,) = llm.embed(long_text, tokenization_kwargs={"truncate_prompt_tokens": 12})
    np.testing.assert_allclose(
        cut.outputs.embedding,
        minilm_engine.embed_array([long_text], PoolingParams(truncate_prompt_tokens=12))[0],
        rtol=0,
        atol=1e-6,
    )
    with pytest.raises(InvalidInputError, match="302 tokens, more than the model's maximum of 256"):
        llm.embed(long_text, tokenization_kwargs={"truncation": False})  # as without: too long is an error
    scores = llm.score("q", [long_text], tokenization_kwargs={"truncation": True})
    assert isinstance(scores[0].outputs.score, float)
    (tokens,) = llm.encode(long_text, pooling_task="token_embed", tokenization_kwargs={"truncation": True})
    assert tokens.outputs.data.shape[0] == 256


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_length": 20}, "max_length cuts texts only with truncation=True"),
        ({"add_special_tokens": False}, "add_special_tokens=False is not supported"),
        ({"truncation_side": "left"}, "truncation_side='left' is not supported"),
        ({"padding": "max_length"}, "padding='max_length' is not supported"),
        ({"do_lower_case": True}, r"\['do_lower_case'\] have no counterpart here"),
    ],
)
def test_tokenization_kwargs_it_cannot_honour_are_refused(llm: LLM, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        llm.embed("retrieval " * 300, tokenization_kwargs=kwargs)


def test_tokenization_kwargs_are_refused_before_the_prompts_in_every_task(llm: LLM) -> None:
    # vLLM checks a call's truncation before it reads a prompt; score did so here already, and
    # embed, classify, reward and encode do too, so one call's two mistakes are told in one order
    bad_prompt, refused = {"prompt": "a text", "bogus": 1}, {"padding": "max_length"}
    calls = {
        "embed": lambda: llm.embed(bad_prompt, tokenization_kwargs=refused),
        "encode": lambda: llm.encode(bad_prompt, pooling_task="embed", tokenization_kwargs=refused),
        "score": lambda: llm.score(bad_prompt, "a passage", tokenization_kwargs=refused),
    }
    for call in calls.values():
        with pytest.raises(InvalidInputError, match="padding='max_length' is not supported"):
            call()
    with pytest.raises(InvalidInputError, match=r"text prompt keys \['bogus'\] are not supported"):
        llm.embed(bad_prompt)  # alone, the prompt's own mistake is told


def test_truncation_keyword_and_tokenization_kwargs_must_agree(llm: LLM) -> None:
    (out,) = llm.embed(
        "retrieval " * 30, truncate_prompt_tokens=7, tokenization_kwargs={"truncate_prompt_tokens": 7}
    )
    assert len(out.prompt_token_ids) == 7
    with pytest.raises(InvalidInputError, match="disagree"):
        llm.embed(
            "retrieval " * 30, truncate_prompt_tokens=7, tokenization_kwargs={"truncate_prompt_tokens": 8}
        )


def test_one_pooling_params_per_prompt(minilm_path: Path, minilm_engine: Engine) -> None:
    matryoshka = LLM(str(minilm_path), hf_overrides={"matryoshka_dimensions": [128, 256, 384]})
    params = [PoolingParams(dimensions=128), PoolingParams(), PoolingParams(dimensions=128)]
    out = matryoshka.embed(SENTENCES[:3], pooling_params=params)
    assert [len(o.outputs.embedding) for o in out] == [128, 384, 128]
    full = minilm_engine.embed_array(SENTENCES[:3])
    np.testing.assert_allclose(out[1].outputs.embedding, full[1], rtol=0, atol=1e-6)
    cut = full[2, :128] / np.linalg.norm(full[2, :128])  # truncated before it is normalised
    np.testing.assert_allclose(out[2].outputs.embedding, cut, rtol=0, atol=1e-5)
    with pytest.raises(InvalidInputError, match="2 pooling_params for 3 prompts"):
        matryoshka.embed(SENTENCES[:3], pooling_params=params[:2])
    with pytest.raises(InputTypeError, match=r"pooling_params\[1\] is a dict"):
        matryoshka.embed(SENTENCES[:2], pooling_params=[PoolingParams(), {"dimensions": 128}])


def test_request_ids_count_over_the_llms_life(minilm_path: Path) -> None:
    llm = LLM(str(minilm_path))
    first = [o.request_id for o in llm.embed(SENTENCES[:2])]
    second = [o.request_id for o in llm.score("q", SENTENCES[:2])]
    assert first == ["0", "1"] and second == ["2", "3"]


def test_a_multimodal_prompt_s_image_may_be_a_list_of_one_as_vllm_takes_it(
    tmp_path: Path, minilm_path: Path
) -> None:
    """vLLM reads ``multi_modal_data={"image": [picture]}`` as the one image its list holds (a CLIP
    prompt may have one); it was refused as 'one image per prompt'. Two are still refused."""
    from poolrag.testing.tiny_models import build_clip

    picture = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"
    clip = build_clip(tmp_path / "clip", minilm_path)
    llm = LLM(str(clip), runner="pooling")
    want = Engine(clip).embed_array([picture])
    for image in ([picture], (picture,)):
        (out,) = llm.embed({"prompt": "", "multi_modal_data": {"image": image}})
        np.testing.assert_allclose([out.outputs.embedding], want, atol=1e-6)
    with pytest.raises(InvalidInputError, match="one image per prompt"):
        llm.embed({"prompt": "", "multi_modal_data": {"image": [picture, picture]}})
