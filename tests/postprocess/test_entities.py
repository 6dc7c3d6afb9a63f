"""BIO grouping: spans, offsets and scores from per-token probabilities."""

from __future__ import annotations

import numpy as np

from poolrag.postprocess.entities import group_entities

LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def _probs(tags: list[int], confidence: float = 0.9) -> np.ndarray:
    probs = np.full((len(tags), len(LABELS)), (1 - confidence) / (len(LABELS) - 1), dtype=np.float32)
    probs[np.arange(len(tags)), tags] = confidence
    return probs


def test_b_and_i_tags_merge_into_one_span_with_character_offsets() -> None:
    text = "Ada Lovelace visited New York"
    offsets = [(0, 0), (0, 3), (4, 12), (13, 20), (21, 24), (25, 29), (0, 0)]
    tags = [0, 1, 2, 0, 3, 4, 0]
    entities = group_entities(text, offsets, _probs(tags), LABELS)
    assert [(e.label, e.text, e.start, e.end) for e in entities] == [
        ("PER", "Ada Lovelace", 0, 12),
        ("LOC", "New York", 21, 29),
    ]
    assert entities[0].score == np.float32(0.9)


def test_adjacent_subword_tagged_b_continues_the_word_but_a_spaced_b_starts_a_new_entity() -> None:
    text = "Bob Ann"
    offsets = [(0, 1), (1, 3), (4, 7)]
    entities = group_entities(text, offsets, _probs([1, 1, 1]), LABELS)
    assert [e.text for e in entities] == ["Bob", "Ann"]


def test_label_change_and_min_score_split_and_filter() -> None:
    text = "Paris Hilton"
    offsets = [(0, 5), (6, 12)]
    entities = group_entities(text, offsets, _probs([3, 2], confidence=0.6), LABELS, min_score=0.5)
    assert [(e.label, e.text) for e in entities] == [("LOC", "Paris"), ("PER", "Hilton")]
    assert group_entities(text, offsets, _probs([3, 2], confidence=0.6), LABELS, min_score=0.7) == []


def test_a_tag_without_prefix_reads_as_i_so_io_tagged_words_merge() -> None:
    """IO tagging (``PER``, no B-/I-), as Hugging Face's simple aggregation reads it."""
    io_labels = {0: "O", 1: "PER", 2: "LOC", 3: "ORG", 4: "MISC"}
    text = "Ada Lovelace visited New York"
    offsets = [(0, 0), (0, 3), (4, 12), (13, 20), (21, 24), (25, 29), (0, 0)]
    entities = group_entities(text, offsets, _probs([0, 1, 1, 0, 2, 2, 0]), io_labels)
    assert [(e.label, e.text) for e in entities] == [("PER", "Ada Lovelace"), ("LOC", "New York")]
    entities = group_entities(text, offsets, _probs([0, 1, 2, 0, 2, 3, 0]), io_labels)
    assert [(e.label, e.text) for e in entities] == [
        ("PER", "Ada"),
        ("LOC", "Lovelace"),
        ("LOC", "New"),
        ("ORG", "York"),
    ]


def test_adjacent_b_tags_in_a_script_without_spaces_start_new_entities_as_in_hf() -> None:
    """Chinese and Japanese write words without spaces, and BERT reads each ideograph as a word of
    its own: a B- there is a new entity (two names side by side), as HF's simple aggregation
    reads it, not a word piece continuing the entity before it."""
    text = "张三李四在北京"
    offsets = [(0, 0), *[(i, i + 1) for i in range(len(text))], (0, 0)]
    tags = [0, 1, 2, 1, 2, 0, 3, 4, 0]
    entities = group_entities(text, offsets, _probs(tags), LABELS)
    assert [(e.label, e.text, e.start, e.end) for e in entities] == [
        ("PER", "张三", 0, 2),
        ("PER", "李四", 2, 4),
        ("LOC", "北京", 5, 7),
    ]
    kana = "タナカスズキ"  # two katakana names side by side, one token per name
    entities = group_entities(kana, [(0, 3), (3, 6)], _probs([1, 1]), LABELS)
    assert [e.text for e in entities] == ["タナカ", "スズキ"]


def test_bioes_tagged_chinese_places_side_by_side_stay_two() -> None:
    """BIOES as Chinese NER models tag characters: a B- right after an E- of the same label is a
    new place, though no space stands between them."""
    bioes = {0: "O", 1: "B-GPE", 2: "E-GPE"}
    text = "中国北京"
    offsets = [(i, i + 1) for i in range(len(text))]
    probs = np.full((4, 3), 0.05, dtype=np.float32)
    probs[np.arange(4), [1, 2, 1, 2]] = 0.9
    entities = group_entities(text, offsets, probs, bioes)
    assert [e.text for e in entities] == ["中国", "北京"]


def test_a_lone_space_piece_that_is_not_special_is_tagged_but_adds_no_characters() -> None:
    """A byte-level tokenizer's lone space has empty offsets but is no special token: its O ends
    the entity (as in HF), its I- continues one without stretching it over the space."""
    text = "Ada  Lovelace"
    offsets = [(0, 0), (0, 3), (5, 5), (5, 13), (0, 0)]
    special = [1, 0, 0, 0, 1]
    entities = group_entities(text, offsets, _probs([0, 2, 0, 2, 0]), LABELS, special=special)
    assert [(e.text, e.start, e.end) for e in entities] == [("Ada", 0, 3), ("Lovelace", 5, 13)]
    entities = group_entities(text, offsets, _probs([0, 2, 2, 2, 0]), LABELS, special=special)
    assert [(e.text, e.start, e.end) for e in entities] == [("Ada  Lovelace", 0, 13)]
    entities = group_entities("Ada ", [(0, 3), (4, 4)], _probs([1, 2]), LABELS, special=[0, 0])
    assert [(e.text, e.end) for e in entities] == [("Ada", 3)]  # HF's span ends on the space


def test_a_decomposed_accent_after_an_entity_is_part_of_it(assets) -> None:
    """Text in NFD (macOS file names, some PDFs' text) holds ``e`` + U+0301 for ``é``. BERT uncased
    strips the mark, so no token covers it: rampart-pii's given name ended before it ('Jose'), not
    as written, and masking text[start:end] left a lone accent."""
    import unicodedata

    from poolrag import Engine

    text = unicodedata.normalize("NFD", "Contact José Müller at jose.mueller@example.de")
    entities = Engine(assets / "rampart-pii").extract_entities([text])[0]
    names = {e.label: e for e in entities if e.label in ("GIVEN_NAME", "SURNAME")}
    assert names["GIVEN_NAME"].text == unicodedata.normalize("NFD", "José")
    assert names["SURNAME"].text == unicodedata.normalize("NFD", "Müller")
    for e in entities:
        assert text[e.start : e.end] == e.text
        assert e.end == len(text) or unicodedata.category(text[e.end]) != "Mn"
