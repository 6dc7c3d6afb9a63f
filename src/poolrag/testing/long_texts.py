"""Paragraphs longer than a model's length limit, for the tests that send one text through every
door (engine, ``LLM``, the server's routes, both frameworks, ingest) and compare the vectors.

Each paragraph is prose of a fixed number of tokens (special tokens included) in the model's own
tokenizer, so "277 tokens for all-MiniLM-L6-v2, whose limit is 256" is exact; paragraphs take the
sentences in different orders, so a door that mixed up their order would fail.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

_SENTENCES = (
    "Honeybee foragers tell their sisters where flowers are with the waggle dance.",
    "The angle of the dance points to the food relative to the position of the sun.",
    "Tides are caused mainly by the Moon's gravity, which raises two bulges in the oceans.",
    "When the Sun and the Moon line up, their pulls add together and produce spring tides.",
    "Sourdough bread rises with a starter of wild yeast and lactic acid bacteria.",
    "The dough ferments slowly, is shaped, proofed overnight and baked in a hot covered pot.",
    "Rust manages memory through ownership, and every value has exactly one owner.",
    "The borrow checker allows one mutable reference or many shared ones, never both.",
    "Good chess openings control the centre, develop the minor pieces and castle early.",
    "Glaciers carve wide valleys as they creep downhill under their own enormous weight.",
    "A lighthouse keeper once trimmed the wick and wound the clockwork every few hours.",
    "Volcanic soils are fertile because the ash weathers into minerals that plants need.",
)
_STEPS = (1, 5, 7, 11)  # coprime with the 12 sentences: each visits all of them in an order of its own

#: all-MiniLM-L6-v2 reads 256 tokens: a paragraph of this many loses 21 of them.
LONG_TOKENS = 277


def long_paragraph(tokenizer: Any, number: int = 0, tokens: int = LONG_TOKENS) -> str:
    """Paragraph ``number`` (48 differ, then they repeat): prose of exactly ``tokens`` tokens in
    ``tokenizer`` (special tokens included; one more where a word's pieces step over the count)."""
    start, step = number % len(_SENTENCES), _STEPS[number // len(_SENTENCES) % len(_STEPS)]
    words: list[str] = []
    i = 0
    while _count(tokenizer, " ".join(words)) < tokens + 8:
        words += _SENTENCES[(start + i * step) % len(_SENTENCES)].split()
        i += 1
    low, high = 1, len(words)  # the fewest words whose text reaches ``tokens``
    while low < high:
        middle = (low + high) // 2
        if _count(tokenizer, " ".join(words[:middle])) >= tokens:
            high = middle
        else:
            low = middle + 1
    return " ".join(words[:low])


def _count(tokenizer: Any, text: str) -> int:
    from poolrag.tokenization.tokenizer_lock import call_tokenizer  # an engine may share the tokenizer

    return len(call_tokenizer(tokenizer, text, add_special_tokens=True)["input_ids"])


def long_batch(tokenizer: Any, size: int = 200, paragraphs: int = 16, shorts: int = 4) -> list[str]:
    """``size`` texts: ``paragraphs`` distinct long paragraphs and ``shorts`` short texts, repeated
    in a shuffled order (an engine computes each distinct text once, so a 200-text batch is cheap
    while every position still has its own vector to check)."""
    distinct = [long_paragraph(tokenizer, i) for i in range(paragraphs)]
    distinct += [f"Short note {i} on tides, bread and bees." for i in range(shorts)]
    texts = [distinct[i % len(distinct)] for i in range(size)]
    random.Random(45).shuffle(texts)
    return texts


def sentence_transformers_vectors(texts: list[str], folder: str | Path) -> np.ndarray:
    """sentence-transformers' vectors of ``texts`` (the reference every door is held to), each
    distinct text encoded once."""
    from sentence_transformers import SentenceTransformer

    distinct = sorted(set(texts))
    reference = SentenceTransformer(str(folder), device="cpu").encode(distinct)
    index = {text: i for i, text in enumerate(distinct)}
    return reference[[index[text] for text in texts]]
