"""Group per-token BIO tags into entities with character offsets (what a NER user wants)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# scripts written without spaces between words: a piece there is a word, not part of one
_SPACELESS_SCRIPTS = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
)


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity :meth:`poolrag.Engine.extract_entities` found: its ``label`` (the tag without its
    B-/I- prefix), its ``text`` as written in the input (``text[start:end]``; transformers' pipeline
    gives the decoded, e.g. lowercased, ``word`` instead) and ``score``, the mean probability of its
    tokens' tags, as the pipeline's ``aggregation_strategy="simple"`` scores it."""

    label: str
    text: str
    start: int  # character offsets into the original text, end exclusive
    end: int
    score: float  # mean probability of the tokens' winning tags


def _grapheme_end(text: str, end: int) -> int:
    """``end`` moved past the combining marks that follow it: a tokenizer that strips accents (BERT
    uncased) gives no token the ``\u0301`` of a decomposed ``José``, so the span ended inside the
    letter (``Jose``, and a redaction left the accent behind)."""
    while end < len(text) and unicodedata.category(text[end]) in ("Mn", "Me"):
        end += 1
    return end


def _split_tag(tag: str) -> tuple[str, str]:
    """(prefix, label); a label without a prefix (IO tagging) reads as I-, as HF's ``get_tag``."""
    if len(tag) > 2 and tag[1] in "-_" and tag[0] in "BIES":
        return tag[0], tag[2:]
    return ("O", "") if tag == "O" else ("I", tag)


def _spaceless(char: str) -> bool:
    return unicodedata.name(char, "").startswith(_SPACELESS_SCRIPTS)


def _continues_word(text: str, at: int) -> bool:
    """Whether a piece starting at ``at`` can be the rest of the word before it: no space between,
    and not between two characters of a script written without spaces (Chinese, Japanese, Thai),
    where BERT reads each ideograph as a word and two names often stand side by side."""
    if not 0 < at < len(text):
        return False
    before, after = text[at - 1], text[at]
    return not (before.isspace() or after.isspace() or (_spaceless(before) and _spaceless(after)))


def group_entities(
    text: str,
    offsets: Sequence[tuple[int, int]],
    probs: np.ndarray,
    id2label: Mapping[int, str],
    min_score: float = 0.0,
    special: Sequence[int] | None = None,
) -> list[Entity]:
    """Merge tagged tokens into spans as Hugging Face's ``aggregation_strategy="simple"`` does,
    but for word pieces.

    ``offsets`` are the tokenizer's (start, end) per token. Special tokens are skipped: those
    ``special`` marks (the tokenizer's ``special_tokens_mask``, as HF reads it), else every token
    with empty offsets. Each token takes its most probable tag. As in HF: O ends an entity; an I-
    tag continues the entity before it when the label is the same, else starts one (lenient after
    O); a tag without a prefix (IO tagging, ``PER``) reads as I-, so consecutive ``PER`` words are
    one entity; a B- tag starts an entity; a piece with empty offsets that is not special (a
    byte-level tokenizer's lone space, which ``trim_offsets`` empties) is tagged like any other,
    but adds no characters to a span, and an entity of such pieces alone (HF's empty ``word``) is
    dropped. Unlike HF: a B- tag on a piece that starts where the entity
    before it ends, with the same label and no space between, continues it (a model that tags
    every piece of a word B-, as rampart-pii does e-mail addresses, gives one entity where HF
    gives one per piece), except in scripts written without spaces (Chinese, Japanese, Thai), where
    a B- starts an entity as in HF; E- continues and S- starts an entity (BIOES), and
    ``B_``/``I_`` are read as ``B-``/``I-`` (HF reads these tags as labels of their own); an entity
    ends after the combining marks that follow its last piece (HF ends it before a decomposed accent
    an uncased tokenizer dropped).
    """
    entities: list[Entity] = []
    current: tuple[str, int, int, list[float]] | None = None

    def close() -> None:
        nonlocal current
        if current is not None:
            label, start, end, scores = current
            score = float(np.mean(scores))
            if start < end and score >= min_score:
                end = _grapheme_end(text, end)
                entities.append(Entity(label, text[start:end], start, end, score))
            current = None

    best = probs.argmax(axis=-1)
    skipped = special if special is not None else [start == end for start, end in offsets]
    for (start, end), tag_id, row, skip in zip(offsets, best, probs, skipped, strict=True):
        if skip:
            continue
        prefix, label = _split_tag(id2label[int(tag_id)])
        score = float(row[tag_id])
        if prefix == "O":
            close()
        elif current is not None and prefix in ("I", "E") and label == current[0]:
            # an empty piece (a lone space) keeps the span's end: no trailing whitespace
            current = (label, current[1], end if start < end else current[2], [*current[3], score])
        elif (
            current is not None
            and prefix == "B"
            and label == current[0]
            and start == current[2]
            and _continues_word(text, start)
        ):
            # a word piece tagged B- right after the previous piece continues the same word
            current = (label, current[1], end, [*current[3], score])
        else:
            close()
            current = (label, start, end, [score])
    close()
    return entities
