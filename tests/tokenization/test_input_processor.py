"""What the engine says of an input dict that is not one of its shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag import Engine
from poolrag.errors import InputTypeError
from poolrag.testing.tiny_models import build_clip


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
