"""What the engine says of an input dict that is not one of its shapes, and how a long call is tokenised."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.errors import InputTypeError
from poolrag.testing.tiny_models import build_clip
from poolrag.tokenization.input_processor import TOKENIZE_PART


def test_a_modality_dict_is_named_as_such_not_as_bad_token_ids(tmp_path: Path, minilm_path: Path) -> None:
    """sentence-transformers' multimodal inputs and Jina's ``input`` items are ``{"image": ...}`` and
    ``{"text": ...}``; given to the engine, they were refused as 'prompt_token_ids must be a list of
    integers', a key the caller never wrote."""
    engine = Engine(build_clip(tmp_path / "clip", minilm_path), tune="off")
    photo = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"
    with pytest.raises(
        InputTypeError,
        match=r"^input\[1\]: \{'image': \.\.\.\} is not an input here; give the image itself",
    ):
        engine.embed_array(["a cat", {"image": photo}])
    with pytest.raises(
        InputTypeError,
        match=r"^input\[0\]: \{'text': \.\.\.\} is not an input here; give the text itself",
    ):
        engine.embed_array([{"text": "a cat"}])


def test_a_long_call_is_tokenised_a_part_at_a_time(
    minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``embed_array`` of 50,000 short texts handed them to the tokenizer in one call, whose
    encodings (offsets, masks, words of every token) of all of them were held at once: the call's
    peak grew with its length, not with the token budget, 355 MB above the loaded model's RSS where
    the ids kept are 35 MB. Parts of the call are tokenised in turn; the vectors keep their order and
    values across a part's edge, a text cut at the model's length among them."""
    tokenizer = minilm_engine.tokenizer
    call = type(tokenizer).__call__
    sizes: list[int] = []

    def counted(self: object, text: object, *args: object, **kwargs: object) -> object:
        if isinstance(text, list):
            sizes.append(len(text))
        return call(self, text, *args, **kwargs)

    texts = [f"text number {i} " + "word " * (i % 7) for i in range(2 * TOKENIZE_PART + 5)]
    texts[TOKENIZE_PART] = "long " * 1000
    monkeypatch.setattr(type(tokenizer), "__call__", counted)
    vectors = minilm_engine.embed_array(texts)
    monkeypatch.undo()
    assert sizes and max(sizes) <= TOKENIZE_PART
    for i in (0, TOKENIZE_PART - 1, TOKENIZE_PART, TOKENIZE_PART + 1, len(texts) - 1):
        np.testing.assert_allclose(vectors[i], minilm_engine.embed_array([texts[i]])[0], atol=1e-5)
