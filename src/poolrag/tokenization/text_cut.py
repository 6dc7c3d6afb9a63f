"""Cut a long text before tokenising it when only its first tokens are kept.

A fast tokenizer holds several records per token (id, offsets, word index, ...) plus per-byte
alignments, hundreds of bytes per token: a 16 MB text of short words needs gigabytes although a
truncated request keeps only the model's maximum. So a text is cut first, and the cut is exact:

* only before a space (U+0020) that follows a non-space character, and only for tokenizers whose
  pre-tokenizer never lets a piece run on past a space (BERT's, byte-level BPE's regex,
  SentencePiece's Metaspace; checked on probe texts), so the tokens before the cut are the whole
  text's own; where the normaliser puts spaces around each CJK ideograph (BERT's
  ``handle_chinese_chars``, checked on one probe per range), also before an ideograph that follows
  a non-space character: Chinese or Japanese text has no spaces, and was tokenised whole;
* the cut starts at a bound from the vocabulary's longest token (a generous chars-per-token
  figure) and moves out (doubling) until the prefix holds at least the tokens asked for: a text
  whose words are long or unknown costs more tokenising, never a different answer.

The same invariant lets :meth:`TextCut.count` count a huge text's tokens window by window, so
"too long" is known without ever holding the whole token list. Tokenizers that fail the probe
(no pre-tokenizer, a slow tokenizer) get the text uncut.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from typing import Any

from transformers import PreTrainedTokenizerBase

from poolrag.fork_holds import hold_over_fork
from poolrag.text_validity import lone_surrogate
from poolrag.tokenization.tokenizer_lock import call_tokenizer

logger = logging.getLogger(__name__)

#: Where a text may be cut: a plain space after a non-space character. No normaliser joins a space
#: to the character before it, and the pieces before it end there whatever follows. (A tokenizer
#: that spaces ideographs apart also gets a cut before each: ``TextCut._cut``.)
_CUT = re.compile(r"(?<=\S) ")
#: The CJK ideograph ranges BERT's normaliser spaces apart (``handle_chinese_chars``).
_IDEOGRAPHS = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
#: First guess of the characters one token covers, whatever the vocabulary says (a vocabulary of
#: long pieces must not make every cut megabytes long; the doubling covers the rest).
_MAX_CHARS_PER_TOKEN = 32
#: Characters tokenised at a time by :meth:`TextCut.count`.
COUNT_WINDOW_CHARS = 1 << 16
#: Probe texts for the pre-tokenizer check: spaces alone, in runs, beside punctuation and digits.
_PROBES = ("one two", "a  b   c", "x, y.z w", "naïve 日本 words", "12345 678", "don't stop ", " lead")


def bare_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """``text``'s token ids without special tokens (nothing else asked of the tokenizer)."""
    return call_tokenizer(
        tokenizer, text, add_special_tokens=False, return_token_type_ids=False, return_attention_mask=False
    )["input_ids"]


def _pieces_stop_at_spaces(pre_tokenizer: Any) -> bool:
    """Whether every pre-token of the probes holds a space only as its first character (or is
    whitespace only)."""
    for probe in _PROBES:
        try:
            pieces = pre_tokenizer.pre_tokenize_str(probe)
        except Exception:  # an unusual pre-tokenizer: no cut, the text is tokenised whole
            return False
        for _, (start, end) in pieces:
            piece = probe[start:end]
            if " " in piece[1:] and not piece.isspace():
                return False
    return True


def _spaced_ideographs(normalizer: Any) -> str:
    """The ideograph ranges ``normalizer`` puts spaces around, as a regex character class's body
    (empty when it spaces none apart, or has no ``normalize_str``)."""
    ranges = []
    for low, high in _IDEOGRAPHS:
        first, last = chr(low), chr(high)
        try:
            spaced = normalizer.normalize_str(f"a{first}{last}b") == f"a {first}  {last} b"
        except Exception:  # no normaliser, or an unusual one: cut before spaces only
            return ""
        if spaced:
            ranges.append(f"{first}-{last}")
    return "".join(ranges)


class TextCut:
    """Where one tokenizer's texts can be cut without changing their first tokens."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        # held weakly: :func:`text_cut_of` keeps this cut as the tokenizer's value in a weak-keyed
        # dict, and a value that holds its key keeps both for ever (every dropped engine's tokenizer)
        self._tokenizer = weakref.ref(tokenizer)
        backend = getattr(tokenizer, "backend_tokenizer", None) if tokenizer.is_fast else None
        pre = backend.pre_tokenizer if backend is not None else None
        self.enabled = pre is not None and _pieces_stop_at_spaces(pre)
        ideographs = _spaced_ideographs(backend.normalizer) if self.enabled else ""
        self._cut = re.compile(rf"(?<=\S)(?: |(?=[{ideographs}]))") if ideographs else _CUT
        longest = max((len(piece.lstrip("#▁Ġ")) for piece in tokenizer.get_vocab()), default=1)
        self.chars_per_token = max(1, min(longest, _MAX_CHARS_PER_TOKEN))
        if not self.enabled:
            logger.debug("this tokenizer's texts are tokenised whole (no safe cut before a space)")

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer this cut is for (alive while anyone cuts with it)."""
        tokenizer = self._tokenizer()
        if tokenizer is None:
            raise ReferenceError("the tokenizer of this TextCut is gone")
        return tokenizer

    def prefix(self, text: str, tokens: int) -> str:
        """A prefix of ``text`` holding at least ``tokens`` tokens (no special tokens), each the
        same as the whole text's; ``text`` itself when it is short or cannot be cut safely."""
        if not self.enabled:
            return text
        chars = (tokens + 2) * self.chars_per_token
        while chars < len(text):
            found = self._cut.search(text, chars)
            if found is None:
                return text
            cut = found.start()
            head = text[:cut]
            if len(bare_ids(self.tokenizer, head)) >= tokens:
                return head
            chars = 2 * cut
        return text

    def first(self, text: str, tokens: int) -> str:
        """``text`` through the end of its ``tokens``-th token (no special tokens counted), whole
        when it holds no more; a slow tokenizer knows no offsets, and a text it cannot read (a lone
        surrogate) is the input stage's to name, so those stay whole."""
        if not self.tokenizer.is_fast or lone_surrogate(text) is not None:
            return text
        head = self.prefix(text, tokens)
        offsets = call_tokenizer(self.tokenizer, head, add_special_tokens=False, return_offsets_mapping=True)[
            "offset_mapping"
        ]
        if len(offsets) > tokens:
            return head[: offsets[tokens - 1][1]]
        # a cut head holds the tokens asked for: the rest is whole text unless a token follows
        return text if head is text or self.count(text[len(head) :], stop_after=0) == 0 else head

    def count(self, text: str, stop_after: int | None = None) -> int:
        """Tokens in ``text`` (no special tokens), counted in windows cut before spaces so no more
        than one window's token list is held at a time. With ``stop_after``, counting stops at the
        first window that takes the total past it (a caller that only needs to know a text is too
        long pays for the limit's worth of tokenising, not the whole text's)."""
        if not self.enabled or len(text) <= COUNT_WINDOW_CHARS:
            return len(bare_ids(self.tokenizer, text))
        total, start = 0, 0
        while start < len(text) and (stop_after is None or total <= stop_after):
            found = self._cut.search(text, start + COUNT_WINDOW_CHARS)
            end = len(text) if found is None else found.start()
            total += len(bare_ids(self.tokenizer, text[start:end]))
            start = end
        return total


class RememberedCut:
    """A :class:`TextCut` for one call whose texts repeat (a rerank's query beside each document):
    each prefix and count is worked out once, not once per pair."""

    def __init__(self, cut: TextCut) -> None:
        self._cut = cut
        self._prefixes: dict[tuple[str, int], str] = {}
        self._counts: dict[str, int] = {}

    def prefix(self, text: str, tokens: int) -> str:
        """:meth:`TextCut.prefix`, remembered."""
        key = (text, tokens)
        head = self._prefixes.get(key)
        if head is None:
            head = self._prefixes[key] = self._cut.prefix(text, tokens)
        return head

    def count(self, text: str) -> int:
        """:meth:`TextCut.count`, remembered."""
        count = self._counts.get(text)
        if count is None:
            count = self._counts[text] = self._cut.count(text)
        return count


_CUTS: weakref.WeakKeyDictionary[Any, TextCut] = weakref.WeakKeyDictionary()
_CUTS_LOCK = threading.Lock()
# a fork waits for a cut being built (it tokenises probes): the child has no thread to finish it
hold_over_fork(lambda: [_CUTS_LOCK])


def text_cut_of(tokenizer: PreTrainedTokenizerBase) -> TextCut:
    """One :class:`TextCut` per tokenizer, kept while the tokenizer lives (building one reads the
    whole vocabulary)."""
    with _CUTS_LOCK:
        cut = _CUTS.get(tokenizer)
        if cut is None:
            cut = _CUTS[tokenizer] = TextCut(tokenizer)
        return cut
