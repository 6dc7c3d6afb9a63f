"""Bad input gets a clear error, never a silent wrong answer."""

from __future__ import annotations

import numpy as np
import pytest

from poolrag import (
    DimensionsError,
    Engine,
    InputTooLongError,
    InputTypeError,
    InvalidInputError,
    ModelLoadError,
    PoolingParams,
    UnsupportedTaskError,
)


def test_unknown_task_for_the_model_names_the_supported_tasks(minilm_engine: Engine) -> None:
    with pytest.raises(UnsupportedTaskError, match="supported tasks: embed, score, token_embed"):
        minilm_engine.classify(["hello"])
    with pytest.raises(InvalidInputError, match="unknown pooling task"):
        minilm_engine.encode(["hello"], pooling_task="generate")


def test_task_option_is_checked_at_load(minilm_path) -> None:
    with pytest.raises(UnsupportedTaskError, match="'classify'"):
        Engine(minilm_path, task="classify")


def test_non_text_input_is_a_type_error(minilm_engine: Engine) -> None:
    for bad in (42, [1.5], ["ok", None], [b"bytes"]):
        with pytest.raises(TypeError):
            minilm_engine.embed(bad)  # type: ignore[arg-type]
    assert issubclass(InputTypeError, TypeError)


def test_empty_list_gives_empty_result(minilm_engine: Engine) -> None:
    assert minilm_engine.embed([]) == []
    assert minilm_engine.embed_array([]).shape == (0, 384)
    assert minilm_engine.score([], []) == []


def test_empty_score_side_is_an_error(minilm_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="non-empty"):
        minilm_engine.score("query", [])
    with pytest.raises(InvalidInputError, match="equal-length"):
        minilm_engine.score(["a", "b"], ["c", "d", "e"])


def test_an_empty_score_text_is_named_by_its_side_and_position(minilm_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match=r"^text_2\[1\] is empty"):
        minilm_engine.score("q", ["a", "   "])
    with pytest.raises(InvalidInputError, match=r"^text_1 is empty$"):
        minilm_engine.score("", ["a"])
    with pytest.raises(InvalidInputError, match=r"^text_1\[1\] is empty$"):
        minilm_engine.score(["q", ""], ["a", "b"])


def test_dimensions_on_a_similarity_score_is_refused_as_for_every_backend(minilm_engine: Engine) -> None:
    """Scores are not vectors: the engine applies the caller's params to ``score`` with the shared rule."""
    with pytest.raises(DimensionsError, match="not to task 'score'"):
        minilm_engine.score("q", ["d"], PoolingParams(dimensions=384))


def test_empty_string_is_an_error(minilm_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        minilm_engine.embed(["fine", "   "])


def test_over_long_input_is_an_error_when_truncation_is_refused(minilm_engine: Engine) -> None:
    long_text = "word " * 1000
    with pytest.raises(InputTooLongError, match="maximum of 256"):
        minilm_engine.embed([long_text], PoolingParams(truncate=False))
    out = minilm_engine.embed([long_text], PoolingParams(truncate_prompt_tokens=-1))
    assert out[0].num_tokens == 256
    out = minilm_engine.embed([long_text], PoolingParams(truncate_prompt_tokens=10))
    assert out[0].num_tokens == 10
    assert out[0].prompt_token_ids[-1] == minilm_engine.tokenizer.sep_token_id  # special tokens kept


def test_a_prompt_that_fills_the_model_is_named_not_a_limit_nobody_gave(minilm_path) -> None:
    """It said "truncate_prompt_tokens=8 leaves no room", naming a parameter the caller never passed."""
    engine = Engine(minilm_path, max_model_len=8, tune="off")
    long_prompt = PoolingParams(prompt="one two three four five six seven eight nine: ")
    with pytest.raises(
        InvalidInputError, match="the prompt leaves no room for text: this model reads 8"
    ) as caught:
        engine.embed_array(["hello"], long_prompt)
    assert "truncate_prompt_tokens" not in str(caught.value)
    with pytest.raises(InvalidInputError, match="truncate_prompt_tokens=6 leaves no room"):
        engine.embed_array(["hello"], PoolingParams(prompt=long_prompt.prompt, truncate_prompt_tokens=6))


def test_truncated_input_equals_embedding_of_the_truncated_tokens(minilm_engine: Engine) -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    truncated = minilm_engine.embed([text], PoolingParams(truncate_prompt_tokens=5))[0]
    manual = minilm_engine.embed([{"prompt_token_ids": truncated.prompt_token_ids}])[0]
    np.testing.assert_array_equal(truncated.outputs.embedding, manual.outputs.embedding)


def test_bad_token_ids_are_rejected(minilm_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="token ids must be in"):
        minilm_engine.embed([{"prompt_token_ids": [101, 10**9, 102]}])
    with pytest.raises(TypeError):
        minilm_engine.embed([{"prompt_token_ids": ["a"]}])
    with pytest.raises(InvalidInputError, match="empty"):
        minilm_engine.embed([{"prompt_token_ids": []}])


def test_token_ids_of_another_tokenizer_are_refused_naming_their_source(minilm_engine: Engine) -> None:
    """tiktoken's ids for "hello world" (what LangChain's OpenAIEmbeddings sends by default) have
    neither [CLS] nor [SEP]; as BERT ids they read "denise 皇" and gave a wrong vector silently."""
    with pytest.raises(InvalidInputError, match=r"do not start with this model's \[CLS\].*tiktoken"):
        minilm_engine.embed([{"prompt_token_ids": [15339, 1917]}])
    own = minilm_engine.tokenizer("hello world")["input_ids"]
    for ids in (own, own[:2], own[1:]):  # the model's own ids, cut at either end
        minilm_engine.embed([{"prompt_token_ids": ids}])


def test_invalid_params_are_rejected() -> None:
    with pytest.raises(InvalidInputError):
        PoolingParams(input_type="passage")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        PoolingParams(truncate_prompt_tokens=0)


def test_missing_model_is_a_load_error(tmp_path) -> None:
    with pytest.raises(ModelLoadError):
        Engine(tmp_path / "nope" / "model")
    with pytest.raises(ModelLoadError, match="model config"):
        Engine(tmp_path)


def test_unknown_pooler_config_key_is_rejected(minilm_path) -> None:
    with pytest.raises(InvalidInputError, match="unknown pooler_config keys"):
        Engine(minilm_path, pooler_config={"pooling": "MEAN"})


def test_invalid_unicode_is_an_error(minilm_engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        minilm_engine.embed(["fine", "broken \ud800 surrogate"])
    assert minilm_engine.embed_array(["naïve café 日本語"]).shape == (1, 384)
