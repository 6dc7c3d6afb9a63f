"""TokenChunker tokenises each document once: a WordPiece model's chunks take their ids from the
document's own tokenisation (no chunk is tokenised again), and those ids are exactly what the chunk's
text gives alone, wherever the cut falls. Tokenizers where a word's ids depend on what precedes it
(byte-level BPE) keep tokenising each chunk alone, and their ids stay exact too.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from poolrag.ingest import Document, TokenChunker

PARAGRAPH = (
    "Honeybees communicate through the waggle dance. The angle of the dance points to the food, and its "
    "duration tells the distance; colonies reproduce by swarming (when the old queen leaves)."
)
HARD = (
    "Café déjà-vu naïveté, résumé: Ünïcödé accents everywhere. 東京都は日本の首都です。 extraordinarily "
    "antidisestablishmentarianism supercalifragilisticexpialidocious (parenthesised)words, "
    "hyphen-joined-compound-words and e-mail@address.example tokens; numbers 3.14159 and 1,000,000. "
    + "x" * 150
    + " tail words after a very long run.\n\nNew paragraph\nwith a line break."
)


class CountingTokenizer:
    """The real tokenizer, counting the calls that tokenise text."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


@pytest.fixture(scope="module")
def tokenizer(minilm_engine):
    return minilm_engine.tokenizer


def _alone(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_a_wordpiece_document_is_tokenised_once_for_all_its_chunks(tokenizer) -> None:
    counting = CountingTokenizer(tokenizer)
    text = "\n\n".join(f"Section {i}. {PARAGRAPH}" for i in range(10))
    chunks = TokenChunker(counting, max_tokens=40, overlap=8).split(Document("doc.md", text))
    assert len(chunks) >= 8
    assert counting.calls == 1
    for chunk in chunks:
        assert list(chunk.token_ids) == _alone(tokenizer, chunk.text)
        assert chunk.num_tokens == len(chunk.token_ids) <= 40


@pytest.mark.parametrize("size", [3, 7, 16, 48])
def test_document_ids_equal_the_chunk_alone_across_accents_cjk_long_words_and_cuts_inside_words(
    tokenizer, size: int
) -> None:
    chunks = TokenChunker(tokenizer, max_tokens=size, overlap=size // 3).split(Document("hard.txt", HARD))
    assert len(chunks) > 1
    for chunk in chunks:
        assert HARD[chunk.start : chunk.end] == chunk.text
        assert list(chunk.token_ids) == _alone(tokenizer, chunk.text)
        assert chunk.num_tokens == len(chunk.token_ids) <= size


def test_a_word_too_long_for_the_vocabulary_is_cut_into_words_it_can_read(tokenizer, minilm_engine) -> None:
    """Seen from outside: a 100,000-character string without spaces became 250 chunks that were
    each one ``[UNK]`` to the model (a word over 100 characters is one), so every stored vector was
    the same. A chunk now holds at most one 100-character slice of such a word: its text alone is a
    word the vocabulary splits, and the ids, the cache key and any reader of the text agree."""
    rng = np.random.default_rng(0)
    text = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 3000))
    chunks = TokenChunker(tokenizer, max_tokens=128).split(Document("blob.txt", text))
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(b.start <= a.end for a, b in itertools.pairwise(chunks))  # no text left out
    for chunk in chunks:
        assert list(chunk.token_ids) == _alone(tokenizer, chunk.text)
        assert 1 < chunk.num_tokens <= 128 and tokenizer.unk_token_id not in chunk.token_ids
    vectors = minilm_engine.embed_array([c.text for c in chunks])  # the text path, as a cache keys it
    similarity = vectors @ vectors.T
    assert similarity[~np.eye(len(chunks), dtype=bool)].max() < 0.999  # no two chunks alike


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(
        st.text(alphabet="abcdéü東京 .,;!?()-'\n", min_size=1, max_size=14), min_size=1, max_size=80
    ),
    size=st.integers(2, 24),
)
def test_any_text_keeps_exact_ids(tokenizer, words: list[str], size: int) -> None:
    text = " ".join(words)
    for chunk in TokenChunker(tokenizer, max_tokens=size, overlap=size // 4).split(Document("t", text)):
        assert list(chunk.token_ids) == _alone(tokenizer, chunk.text)
        assert chunk.num_tokens <= size


def test_byte_level_bpe_still_tokenises_each_chunk_alone() -> None:
    trained = ByteLevelBPETokenizer()
    trained.train_from_iterator([PARAGRAPH, HARD] * 20, vocab_size=400, min_frequency=1, show_progress=False)
    bpe = CountingTokenizer(PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer))
    text = "\n\n".join(f"Section {i}. {PARAGRAPH}" for i in range(6))
    chunks = TokenChunker(bpe, max_tokens=30, overlap=6).split(Document("doc.md", text))
    assert len(chunks) > 3
    assert bpe.calls > len(chunks)  # the document once, then every chunk alone
    for chunk in chunks:
        assert list(chunk.token_ids) == _alone(bpe, chunk.text)


@pytest.mark.parametrize("mark", ["\f", "\v", "\x85", "\x1e"])
def test_a_control_character_python_calls_whitespace_does_not_start_a_word(
    tokenizer, minilm_engine, mark: str
) -> None:
    """Seen from outside: a page break (``\\f``, as PDF text extractors write it), a vertical tab, a
    NEL (``\\x85``, cp1252's ellipsis read as Latin-1) or a record separator between two words is
    whitespace to Python but a character BERT's normaliser deletes: ``alpha\\fbeta`` is one word
    to the model. A chunk starting after it took the document's ids (``##beta ...``), so ingest
    stored a vector of another input than the chunk's text (max |Δ| 0.07 on all-MiniLM-L6-v2)
    under that text's cache key."""
    words = [f"{w}{mark}{w}ward" if i % 5 == 2 else w for i, w in enumerate(PARAGRAPH.split() * 3)]
    text = " ".join(words)
    chunks = [
        chunk
        for size in range(3, 14)
        for chunk in TokenChunker(tokenizer, max_tokens=size, overlap=0).split(Document("page.txt", text))
    ]
    assert any(text[c.start - 1] == mark for c in chunks if c.start)  # cuts fall just after it
    for chunk in chunks:
        assert list(chunk.token_ids) == _alone(tokenizer, chunk.text)
    framed = [{"prompt_token_ids": minilm_engine.frame_token_ids(c.token_ids)} for c in chunks]
    np.testing.assert_allclose(
        minilm_engine.embed_array(framed), minilm_engine.embed_array([c.text for c in chunks]), atol=1e-5
    )
