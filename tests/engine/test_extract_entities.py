"""``Engine.extract_entities`` against transformers' token-classification pipeline with
``aggregation_strategy="simple"``, the grouping it follows, on a tiny random IO-tagged model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

from poolrag import Engine, InputTooLongError

IO_LABELS = {"0": "PER", "1": "O", "2": "LOC", "3": "ORG", "4": "MISC"}  # no B-/I- prefixes
TEXTS = [
    "My name is John Smith",
    "Ada Lovelace visited New York on 12 June, then flew to São Paulo.",
    "Write to john.smith@example.com or call +1 555 0100.",
]


@pytest.fixture(scope="module")
def io_tagged(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    from poolrag.testing.tiny_models import build_encoder

    folder = build_encoder(tmp_path_factory.mktemp("io-ner"), "bert", minilm_path, head="token", num_labels=5)
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = IO_LABELS
    config["label2id"] = {label: int(i) for i, label in IO_LABELS.items()}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_io_tagged_entities_match_hf_simple_aggregation(io_tagged: Path) -> None:
    """A tag without a prefix reads as I-, as HF's simple aggregation reads it: consecutive words
    of one label are one entity, not one entity per word."""
    pipe = transformers.pipeline(
        "token-classification", model=str(io_tagged), aggregation_strategy="simple", device="cpu"
    )
    engine = Engine(io_tagged)
    for text, entities in zip(TEXTS, engine.extract_entities(TEXTS), strict=True):
        ours = [(e.label, e.start, e.end, round(e.score, 4)) for e in entities]
        theirs = [(g["entity_group"], g["start"], g["end"], round(float(g["score"]), 4)) for g in pipe(text)]
        assert ours == theirs, text
        assert any(" " in e.text for e in entities), text  # multi-word entities do occur


def test_the_engines_long_input_rule_holds_for_entities_as_for_token_classify(io_tagged: Path) -> None:
    """Cut at the model's length by default; refused, naming the input, with ``truncate=False``
    (it tokenised by itself and always cut, so a refusing engine answered a cut text)."""
    long = "Ada Lovelace visited New York. " * 20
    cutting = Engine(io_tagged, max_model_len=32)
    (entities,) = cutting.extract_entities([long])
    assert entities and max(e.end for e in entities) < len(long) // 2  # only the first 32 tokens read
    refusing = Engine(io_tagged, max_model_len=32, truncate=False)
    with pytest.raises(InputTooLongError, match=r"input\[1\] has \d+ tokens"):
        refusing.token_classify(["short", long])
    with pytest.raises(InputTooLongError, match=r"input\[1\] has \d+ tokens"):
        refusing.extract_entities(["short", long])
