"""``Engine.extract_entities`` against transformers' token-classification pipeline with
``aggregation_strategy="simple"``, the grouping it follows, on tiny random IO-tagged models (a
WordPiece BERT, and a RoBERTa with a byte-level tokenizer whose lone spaces have empty offsets)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import transformers

from poolrag import Engine, InputTooLongError
from poolrag.testing.tiny_models import TOKENIZER_FILES

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
    _io_tagged_config(folder)
    return folder


def _io_tagged_config(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = IO_LABELS
    config["label2id"] = {label: int(i) for i, label in IO_LABELS.items()}
    (folder / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    """A RoBERTa token classifier with a byte-level BPE saved as RoBERTa's (``trim_offsets``): a
    space its vocabulary cannot join to the next word is a piece of its own, with empty offsets."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from poolrag.testing.tiny_models import build_encoder

    folder = build_encoder(
        tmp_path_factory.mktemp("bpe-ner"), "roberta", minilm_path, head="token", num_labels=5
    )
    for name in TOKENIZER_FILES:
        (folder / name).unlink(missing_ok=True)
    _io_tagged_config(folder)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    bpe.train_from_iterator(
        TEXTS * 20, trainers.BpeTrainer(vocab_size=300, special_tokens=specials, initial_alphabet=alphabet)
    )
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 1), trim_offsets=True)
    transformers.RobertaTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=512,
    ).save_pretrained(folder)
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


@pytest.mark.parametrize("problem_type", ["multi_label_classification", "regression"])
def test_scores_are_the_pipelines_softmax_whatever_problem_type_the_config_names(
    io_tagged: Path, tmp_path: Path, problem_type: str
) -> None:
    """The pipeline softmaxes a token classifier's logits whatever ``problem_type`` says, while
    ``token_classify`` takes vLLM's activation for it (a sigmoid, or none for regression)."""
    folder = Path(shutil.copytree(io_tagged, tmp_path / "model"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"problem_type": problem_type}))
    pipe = transformers.pipeline(
        "token-classification", model=str(folder), aggregation_strategy="simple", device="cpu"
    )
    for text, entities in zip(TEXTS, Engine(folder).extract_entities(TEXTS), strict=True):
        ours = [(e.label, e.start, e.end, round(e.score, 4)) for e in entities]
        theirs = [(g["entity_group"], g["start"], g["end"], round(float(g["score"]), 4)) for g in pipe(text)]
        assert ours == theirs, text


def test_a_lone_space_piece_is_tagged_as_in_hf_but_adds_no_characters(byte_level: Path) -> None:
    """A byte-level tokenizer's lone space (offsets trimmed to empty, not a special token) is
    tagged as HF tags it: O there ends an entity, so words either side stay apart, and the
    entity's score counts it. HF's spans that end on it or hold only it are cut to their text."""
    texts = [
        "Ada  Lovelace  visited   New  York",
        "Write  to  john.smith@example.com  or  call  +1  555  0100.",
    ]
    tokenizer = transformers.AutoTokenizer.from_pretrained(byte_level)
    lone = [
        (s, e)
        for text in texts
        for s, e in tokenizer(text, return_offsets_mapping=True)["offset_mapping"][1:-1]
    ]
    assert any(s == e for s, e in lone)  # the tokenizer does make such pieces
    pipe = transformers.pipeline(
        "token-classification", model=str(byte_level), aggregation_strategy="simple", device="cpu"
    )
    for text, entities in zip(texts, Engine(byte_level).extract_entities(texts), strict=True):
        theirs = []
        for group in pipe(text):
            start, end = group["start"], group["end"]
            end = start + len(text[start:end].rstrip())
            if start < end:
                theirs.append((group["entity_group"], start, end, round(float(group["score"]), 4)))
        assert [(e.label, e.start, e.end, round(e.score, 4)) for e in entities] == theirs, text


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
