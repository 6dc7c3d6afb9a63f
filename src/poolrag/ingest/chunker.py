"""Token-aware chunking, using the model's own tokenizer.

Chunks are measured in the tokens the model will actually see, so none is silently truncated at
embedding time. Cuts prefer a paragraph end near the window's end, else the last sentence or line
end in its last 40% (a line break that only wraps prose is none), else the last word end there, and
a chunk never starts inside a word. Consecutive chunks overlap only where a cut had to fall inside a
sentence: after a sentence or paragraph end the next chunk starts right there, so no text is
embedded twice for nothing and a corpus needs no more chunks than its length calls for. Each chunk
keeps its source, character offsets and token ids (so the encoder need not tokenise it again; for
WordPiece tokenizers they are the document's own ids, so each document is tokenised once), and its
id is a UUIDv5 of source + offset + text: the same chunk gets the same id on every run (idempotent
upserts), an edited chunk gets a new one.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from poolrag.counts import check_count
from poolrag.errors import InvalidInputError
from poolrag.ingest.headings import SectionHeadings, section_headings
from poolrag.ingest.readers import Document, FileDocument
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.text_validity import has_visible_text, lone_surrogate
from poolrag.tokenization.tokenizer_lock import call_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

CHUNK_NAMESPACE = uuid.UUID("6f0c2a3e-54c1-5d0e-9a57-2b8f3e1c9d40")
#: Sentence ends when a space follows: Latin, Devanagari's danda, Arabic's question mark, Urdu's stop.
_SENTENCE_END = (".", "!", "?", ":", ";", "\u0964", "\u0965", "\u061f", "\u06d4")
#: Chinese and Japanese sentence ends, which no space follows (。！？ and the half-width ｡).
_CLOSED_SENTENCE_END = ("\u3002", "\uff01", "\uff1f", "\uff61")
_MAX_TOKEN_CHARS = 100  # a "token" spanning more is a word the vocabulary cannot split ([UNK])
#: A chunk's text is at most this many UTF-8 bytes, whatever its tokens: half of Milvus's 65,535-byte
#: text field, so every store keeps the same rows. No token spans more than ``_MAX_TOKEN_CHARS``
#: characters (400 bytes), so a chunk of one token always fits.
MAX_CHUNK_BYTES = 32768
#: Tokens shared by neighbouring chunks unless a caller says otherwise (at most a quarter of a chunk).
DEFAULT_OVERLAP = 32
#: Characters a hard-wrapped line of prose has at least before its soft wrap: it broke because the
#: next word did not fit in 72-80 columns. Shorter lines are code, list items, headings or table rows.
_WRAPPED_LINE = 40
#: Characters read ahead at most while waiting for a space to restart tokenising at (one default
#: piece): a text with none for longer is tokenised up to a piece's end.
_MAX_HELD = 1 << 18


class _SliceId(int):
    """A token id from a slice of a word too long for the vocabulary (:meth:`TokenChunker._split_long`),
    remembering where its slice starts. A chunk holds at most one such slice: two or more are one
    over-long word again as text, one ``[UNK]`` to the model (every chunk of a 100,000-character
    string without spaces had the same vector), while one slice is a word the vocabulary splits."""

    slice_start: int

    def __new__(cls, value: int, slice_start: int) -> _SliceId:
        token = super().__new__(cls, value)
        token.slice_start = slice_start
        return token


def chunk_id(source: str, start: int, text: str) -> str:
    """A chunk's stable id (a UUID string, as Qdrant requires): the same text at the same offset of
    the same source gets the same id on every run, so a re-ingest replaces rather than duplicates."""
    return str(uuid.uuid5(CHUNK_NAMESPACE, f"{source}\x00{start}\x00{text}"))


class ImageSource(Protocol):
    """Where an image chunk's pixels come from, read when its batch is embedded."""

    def load(self) -> Any:
        """The model's input: an image input the engine takes (a path, a PIL image)."""
        ...


@dataclass(frozen=True)
class Chunk:
    id: str
    source: str
    text: str
    start: int
    end: int
    index: int
    num_tokens: int
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The text's token ids without special tokens, exactly as the tokenizer gives them for ``text``
    #: alone (``None`` when unknown); the encoder frames and embeds them without tokenising again.
    token_ids: tuple[int, ...] | None = field(default=None, compare=False, repr=False)
    #: The whole document's text, set only for late chunking (each chunk's vector is pooled from a
    #: pass over it); the chunks of one document share the one string.
    document: str | None = field(default=None, compare=False, repr=False)
    #: What the model reads instead of ``text`` for an image or a PDF page (``text`` is then the
    #: page's text layer, shown by search and indexed by a sparse leg).
    image: ImageSource | None = field(default=None, compare=False, repr=False)

    def model_input(self) -> Any:
        """What the model embeds: the text, or the image (a PDF page is rendered now)."""
        return self.text if self.image is None else self.image.load()

    def payload(self) -> dict[str, Any]:
        """What the store keeps next to the vector."""
        return {
            **self.metadata,
            "text": self.text,
            "source": self.source,
            "start": self.start,
            "end": self.end,
            "chunk_index": self.index,
        }


class TokenChunker:
    """Split documents into windows of at most ``max_tokens`` tokens.

    Args:
        tokenizer: a Hugging Face *fast* tokenizer (offsets mapping is required).
        max_tokens: tokens per chunk, excluding the special tokens the model adds.
        overlap: tokens shared by consecutive chunks where a cut falls inside a sentence (no
            sentence or paragraph end in the window's last 40%), so that sentence is whole in one of
            them (default: 32, at most a quarter of the chunk).
        always_overlap: repeat ``overlap`` tokens after every cut, sentence ends included (what
            fixed-window splitters do; more chunks, each with some of its neighbour's text).
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_tokens: int,
        overlap: int | None = None,
        always_overlap: bool = False,
    ) -> None:
        check_count(max_tokens, "chunk size (max_tokens)")
        if overlap is None:
            overlap = min(DEFAULT_OVERLAP, max_tokens // 4)
        if not 0 <= overlap < max_tokens:
            raise InvalidInputError(
                f"overlap must be between 0 and chunk size - 1 ({max_tokens - 1}), got {overlap}"
            )
        if not getattr(tokenizer, "is_fast", False):
            raise InvalidInputError("token-aware chunking needs a fast tokenizer (offsets mapping)")
        self.tokenizer = tokenizer
        self._slices_exact = _slices_match_alone(tokenizer)
        self._word_breaks: dict[str, bool] = {}  # character -> ends a word for this tokenizer
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.always_overlap = always_overlap

    @classmethod
    def for_model(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        facts: ModelFacts,
        max_tokens: int | None = None,
        overlap: int | None = None,
        *,
        always_overlap: bool = False,
        prompt: str = "",
    ) -> TokenChunker:
        """A chunker whose chunks fit the model's length limit (room left for special tokens and
        the document instruction ``prompt``, which the model reads before each chunk).

        Args:
            tokenizer: the model's own tokenizer (e.g. ``Engine.tokenizer``), so chunks are measured
                in the tokens the model reads.
            facts: the model's facts (length limit, whether ColBERT adds a marker token).
            overlap: tokens shared by neighbouring chunks; ``None``: the constructor's default (32, at
                most a quarter of a chunk). A given overlap that does not fit the chunk size is refused.
            prompt: the model's document prompt (``Engine.document_prompt``, e5's ``passage: ``):
                without it, a chunk of the model's length lost its last tokens to the prompt's.
        """
        limit = facts.max_model_len - tokenizer.num_special_tokens_to_add(pair=False)
        if prompt:
            limit -= len(call_tokenizer(tokenizer, prompt, add_special_tokens=False)["input_ids"])
        if facts.score_kind is ScoreKind.MAXSIM:
            limit -= 1  # ColBERT inserts a [D]/[Q] marker token
        if max_tokens is None:
            max_tokens = min(256, limit)
        elif max_tokens > limit:
            raise InvalidInputError(
                f"chunk size {max_tokens} exceeds what {facts.model_name} accepts "
                f"({limit} tokens plus special tokens{' and its document prompt' if prompt else ''})"
            )
        return cls(
            tokenizer,
            max_tokens=max_tokens,
            overlap=overlap,
            always_overlap=always_overlap,
        )

    def _chunk_ids(self, text: Any, view: _Offsets, i: int, j: int, piece: str) -> list[int]:
        """The ids ``piece`` has alone: the document's own ids for tokens ``[i, j)`` where those are
        provably the same (see :func:`_slices_match_alone`), else ``piece`` tokenised again."""
        if self._slices_exact:
            first = view[i][0]
            if first == 0 or self._breaks_words(text[first - 1]):
                ids = [view[k][2] for k in range(i, j)]
                if None not in ids:
                    return [int(t) for t in ids]  # type: ignore[arg-type]
        return call_tokenizer(self.tokenizer, piece, add_special_tokens=False)["input_ids"]

    @functools.cached_property
    def _trims_spaces(self) -> bool:
        """See :func:`_trims_spaces` (asked only of a piece after the first: a whole text is
        tokenised in one call)."""
        return _trims_spaces(self.tokenizer)

    def _breaks_words(self, char: str) -> bool:
        """Whether a token after ``char`` starts a word for this tokenizer. Python's ``isspace``
        also holds for control characters BERT's normaliser deletes (a form feed, a vertical tab,
        NEL, ``\\x1c``-``\\x1f``), which join the words on either side into one."""
        if not char.isspace():
            return False
        known = self._word_breaks.get(char)
        if known is None:
            known = self._word_breaks[char] = _separates_words(self.tokenizer, char)
        return known

    @staticmethod
    def _end_kind(text: Any, offsets: Any, k: int) -> int:
        """What token ``k`` ends: 2 a paragraph, 1 a sentence or line, 0 neither. ``\\r\\n`` and a
        lone ``\\r`` end lines too: a JSONL record's or CSV cell's text keeps them (files are read
        with universal newlines), and its paragraphs were cut mid-sentence."""
        end = offsets[k][1]
        following = text[end : end + 4]
        if "\r" in following:
            following = following.replace("\r\n", "\n").replace("\r", "\n")
        if following[:2] == "\n\n":
            return 2
        last = text[end - 1]
        if (
            (following[:1] == "\n" and not _soft_wrap(text, end, offsets[k + 1][0]))
            or (last in _SENTENCE_END and following[:1].isspace())
            or last in _CLOSED_SENTENCE_END
        ):
            return 1
        return 0

    def _break_at(self, text: Any, offsets: Any, lo: int, hi: int) -> int:
        """Index after the best cut in tokens ``[lo, hi)`` (token ``hi`` exists): a paragraph end in
        the window's last fifth, else the last sentence, line or paragraph end, else the last word
        end (a chunk ending in part of a word shows and embeds a fragment), else ``hi``.

        A paragraph end further back would cost up to 40% of the window for the nicer cut; over a
        corpus that is ~10% more chunks (RESULTS.md, "Main job vs the LangChain pipeline").
        """
        near = hi - max(1, self.max_tokens // 5)
        sentence: int | None = None
        word: int | None = None
        for k in range(hi - 1, lo - 1, -1):
            if k < near and sentence is not None:
                break  # no paragraph end can win any more
            kind = self._end_kind(text, offsets, k)
            if kind == 2 and k >= near:
                return k + 1
            if kind and sentence is None:
                sentence = k + 1
            if word is None and _starts_word(text, offsets, k + 1):
                word = k + 1
        return sentence or word or hi

    @staticmethod
    def _word_start(text: Any, offsets: Any, i: int, limit: int, floor: int) -> int:
        """First token at or after ``i`` (and before ``limit``) that starts a word; else the last one
        before ``i`` and not before ``floor`` (an overlap ending inside a long word takes the whole
        word rather than start inside it); else ``i``."""

        for k in range(i, limit):
            if _starts_word(text, offsets, k):
                return k
        for k in range(i - 1, floor - 1, -1):
            if _starts_word(text, offsets, k):
                return k
        return i

    def split(self, document: Document | FileDocument, piece_chars: int | None = None) -> list[Chunk]:
        """All chunks of ``document`` (read whole unless ``piece_chars`` is given)."""
        return list(self.iter_chunks(document, piece_chars))

    def iter_chunks(
        self, document: Document | FileDocument, piece_chars: int | None = None
    ) -> Iterator[Chunk]:
        """Chunks of ``document``, reading and tokenizing it one piece at a time.

        What is read is tokenised up to its last word set off by a single space, where every
        tokenizer restarts the same way, and a chunk is cut only once the tokens after it are known,
        so the chunks, offsets and ids are those of the whole text at once, while memory holds about
        two pieces (a text with no such space for over a piece is tokenised up to a piece's end).
        """
        if isinstance(document, Document) and (position := lone_surrogate(document.text)) is not None:
            raise InvalidInputError(
                f"{document.source}: text is not valid Unicode (lone surrogate at character {position})"
            )
        if piece_chars is None:
            pieces: Iterable[str] = [document.text] if isinstance(document, Document) else document.pieces()
        else:
            pieces = document.pieces(piece_chars)
        headings = section_headings(document.source)
        if headings is not None:
            pieces = headings.read(iter(pieces))
        chunks = self._chunks(document.source, iter(pieces), dict(document.metadata))
        if headings is not None:
            return _in_sections(chunks, headings)
        if isinstance(document, Document) and document.page_starts:
            return _on_pages(chunks, document.page_starts)
        return chunks

    def _tokens(self, piece: str, base: int) -> list[tuple[int, int, int | None]]:
        """Token spans of ``piece`` and their ids (None for a span not tokenised whole); text that
        no token covers for more than ``_MAX_TOKEN_CHARS``
        (characters the tokenizer drops: 500,000 combining accents after one letter) is cut into
        slices of that size, so that no chunk spans megabytes between two of its tokens."""
        encoding = call_tokenizer(
            self.tokenizer, piece, add_special_tokens=False, return_offsets_mapping=True
        )
        out: list[tuple[int, int, int | None]] = []
        covered = 0
        ends = [(len(piece), len(piece) + 1)]
        for (a, b), token in zip(
            [*encoding["offset_mapping"], *ends], [*encoding["input_ids"], None], strict=True
        ):
            if a == 0 < base and piece[:1] == " " and self._trims_spaces:
                a = 1  # the space before a piece's first word, which the whole text's offsets leave out
            if b <= a:
                continue
            if a - covered > _MAX_TOKEN_CHARS:
                out.extend(
                    (base + lo, base + min(lo + _MAX_TOKEN_CHARS, a), None)
                    for lo in range(covered, a, _MAX_TOKEN_CHARS)
                )
            if a >= len(piece):
                break
            covered = max(covered, b)
            if b - a > _MAX_TOKEN_CHARS:  # e.g. one [UNK] for a 70 KB string without spaces
                out.extend(self._split_long(piece, a, b, base))
            else:
                out.append((base + a, base + b, token))
        return out

    def _split_long(self, piece: str, a: int, b: int, base: int) -> list[tuple[int, int, int | None]]:
        """Tokens of an over-long token's span, tokenized in slices short enough to be split."""
        out = []
        for lo in range(a, b, _MAX_TOKEN_CHARS):
            hi = min(lo + _MAX_TOKEN_CHARS, b)
            enc = call_tokenizer(
                self.tokenizer, piece[lo:hi], add_special_tokens=False, return_offsets_mapping=True
            )
            spans = [
                (base + lo + x, base + lo + y, _SliceId(token, base + lo))
                for (x, y), token in zip(enc["offset_mapping"], enc["input_ids"], strict=True)
                if y > x
            ]
            out.extend(spans or [(base + lo, base + hi, None)])
        return out

    def _chunks(self, source: str, pieces: Iterator[str], metadata: dict[str, Any]) -> Iterator[Chunk]:
        read = _TokenStream(pieces, self._tokens)
        text = read.text
        seen: set[str] = set()
        index = 0
        i = 0
        while True:
            read.load_past(i + self.max_tokens)  # enough to decide this chunk as the whole text would
            n = read.count
            if i >= n:
                return
            view = _Offsets(read.offsets, read.first)
            j, end, piece, ids = self._cut(text, view, i, n)
            cid = chunk_id(source, view[i][0], piece)
            # Some tokenizers give invisible characters tokens: a chunk of only those is not text.
            if cid not in seen and has_visible_text(piece):
                seen.add(cid)
                yield Chunk(cid, source, piece, view[i][0], end, index, len(ids), dict(metadata), tuple(ids))
                index += 1
            if j >= n and not read.more:
                return
            i = self._next_start(text, view, i, j)
            read.drop_before(i)

    def _cut(self, text: _Window, view: _Offsets, i: int, n: int) -> tuple[int, int, str, list[int]]:
        """The chunk that starts at token ``i`` of ``n`` known: the token after it, where its text
        ends, its text and its ids. Cut at :meth:`_break_at`, then shortened while its text alone has
        more tokens than ``max_tokens`` or more bytes than :data:`MAX_CHUNK_BYTES`."""
        j = min(i + self.max_tokens, n)
        if j < n:
            j = self._break_at(text, view, i + max(1, (self.max_tokens * 3) // 5), j)
        j = _one_slice(view, i, j)
        while True:
            start, end = view[i][0], _word_end(text, view, j, n)
            piece = text[start:end]
            ids = self._chunk_ids(text, view, i, j, piece)
            count = len(ids)
            size = len(piece) if piece.isascii() else len(piece.encode("utf-8"))
            if (count <= self.max_tokens and size <= MAX_CHUNK_BYTES) or j - i <= 1:
                return j, end, piece, ids
            if count > self.max_tokens:
                j = max(i + 1, j - (count - self.max_tokens))
            else:  # few tokens over many bytes: keep the share of tokens that fits
                j = i + max(1, (j - i) * MAX_CHUNK_BYTES // size)
            j = _last_word_end(text, view, i + max(1, (j - i) * 3 // 5), j)  # as _break_at's floor

    def _next_start(self, text: _Window, view: _Offsets, i: int, j: int) -> int:
        """The first token of the chunk after tokens ``[i, j)``: ``j``, or ``overlap`` tokens back
        from it (at a word's start) where the cut fell inside a sentence."""
        if isinstance(view[j - 1][2], _SliceId):
            return j  # a cut inside an over-long word: slices of it are no sentence to repeat
        if not self.always_overlap and self._end_kind(text, view, j - 1):
            return j  # the cut ends a sentence: nothing of it to repeat
        return self._word_start(text, view, max(j - self.overlap, i + 1), j, i + 1)


def _on_pages(chunks: Iterator[Chunk], page_starts: tuple[int, ...]) -> Iterator[Chunk]:
    """Each chunk naming the page (from 1) its text starts on, and ``last_page`` where it runs
    over onto later ones (three short slides in one chunk: a citation of "page 1" alone sent the
    reader to the wrong slide for the third's text)."""
    for chunk in chunks:
        page = max(bisect.bisect_right(page_starts, chunk.start), 1)
        last = max(bisect.bisect_right(page_starts, max(chunk.end - 1, chunk.start)), page)
        pages = {"page": page} | ({"last_page": last} if last > page else {})
        yield dataclasses.replace(chunk, metadata={**chunk.metadata, **pages})


def _in_sections(chunks: Iterator[Chunk], headings: SectionHeadings) -> Iterator[Chunk]:
    """Each chunk naming the ``headings`` (outermost first) of the section its text starts in, once
    the lines that decide them are read; a chunk before the first heading names none."""
    waiting: list[Chunk] = []
    for chunk in chunks:
        waiting.append(chunk)
        while waiting and waiting[0].start < headings.settled:
            yield _headed(waiting.pop(0), headings)
    yield from (_headed(chunk, headings) for chunk in waiting)  # the pieces are all read


def _headed(chunk: Chunk, headings: SectionHeadings) -> Chunk:
    path = headings.at(chunk.start)
    return dataclasses.replace(chunk, metadata={**chunk.metadata, "headings": list(path)}) if path else chunk


def _soft_wrap(text: Any, end: int, next_start: int) -> bool:
    """Whether the line break at ``end`` only wraps running prose (RST, man pages, Markdown hard-wrapped
    at 72-80 columns): a full line ending in a word or comma, the next one going on with a lower-case
    word. Such a break is a space between words, not a line end: counted as one, the last one in a
    window beat a sentence end a few tokens before it, and ~5% of cuts in such documents fell
    mid-sentence. Table rows (``|``), list items, headings and quotes start the next line otherwise,
    and code lines are short, end in punctuation, are comments, or go on with an identifier or a key
    (``foo.bar(``, ``napi_value``, ``name:``), so they are still cut at their line ends."""
    line = text[max(end - 2 * _WRAPPED_LINE, 0) : end].replace("\r", "\n")
    line = line[line.rfind("\n") + 1 :].lstrip()
    words = text[next_start : next_start + _WRAPPED_LINE].split(maxsplit=1)  # none: a byte-level BPE
    word = words[0] if words else ""  # token of the line break and a deep indent after it
    return (
        len(line) >= _WRAPPED_LINE
        and bool(word)
        and (line[-1].isalnum() or line[-1] == ",")
        and not line.startswith(("#", "//"))  # a comment above a line of code
        and word[0].islower()
        and word.rstrip(",.!?)'\"").replace("-", "").isalpha()  # not a key (``name:``)
    )


def _restart(text: str, lo: int = 1) -> int:
    """Where the last word of ``text`` that a single space sets off starts (the space's index; 0
    if none), a place where every tokenizer restarts as it goes on in the whole text: WordPiece's
    words split at it, byte-level BPE's and SentencePiece's next token starts with that space, and
    no gap of untokenised text runs across it. Only spaces from ``lo`` on are looked at: text held
    piece after piece is not scanned again (a text of double spaces took 5x as long at 4 Ki pieces)."""
    k = len(text) - 1
    while (k := text.rfind(" ", lo, k)) >= lo:
        if not text[k - 1].isspace() and not text[k + 1].isspace():
            return k
    return 0


def _word_end(text: Any, view: Any, j: int, n: int) -> int:
    """End of a chunk whose last token is ``j - 1``: past what no token covers up to the next space
    or token. An uncased tokenizer's normaliser drops nonspacing marks (Hindi's vowel signs, Thai's
    tone marks, a decomposed accent), so a word's last token can end before its last marks; cut
    there, a chunk showed ``में`` as ``म`` and a document's last marks were in no chunk."""
    end = view[j - 1][1]
    limit = view[j][0] if j < n else text.end
    while end < limit and not text[end].isspace():
        end += 1
    return end


def _last_word_end(text: Any, offsets: Any, lo: int, hi: int) -> int:
    """The last cut in tokens ``[lo, hi]`` (token ``hi`` exists) where a word ends, else ``hi``
    (a chunk cut back further than ``lo`` for a word end costs more than the fragment): for
    a chunk shortened because its text alone has more tokens than the document gave it (byte-level
    BPE merges its first word otherwise) or too many bytes. Shortened by the excess alone, such a
    chunk ended inside a word (``automatically gener``) and the next one started there."""
    for k in range(hi, lo - 1, -1):
        if _starts_word(text, offsets, k):
            return k
    return hi


def _starts_word(text: Any, offsets: Any, k: int) -> bool:
    """Whether token ``k`` starts a word: whitespace before it or, in byte-level BPE's offsets
    without trimming (GPT-2's, Qwen's, ``ByteLevelBPETokenizer``'s), the space it holds."""
    start = offsets[k][0]
    return start == 0 or text[start - 1].isspace() or text[start].isspace()


def _one_slice(view: Any, i: int, j: int) -> int:
    """End of a chunk of tokens ``[i, j)`` that holds at most one slice of an over-long word
    (:class:`_SliceId`): its text alone is then a word the vocabulary splits, so the chunk's ids,
    its cache key and every reader of its text agree."""
    first: int | None = None
    for k in range(i, j):
        token = view[k][2]
        if isinstance(token, _SliceId):
            if first is None:
                first = token.slice_start
            elif token.slice_start != first:
                return k
    return j


def _slices_match_alone(tokenizer: Any) -> bool:
    """Whether a run of the document's tokens that starts a word has, as text alone, exactly the
    document's ids for it: true of WordPiece behind BERT's pre-tokenizer (words split at whitespace
    and punctuation, each word split greedily longest-prefix-first, so a word cut after any of its
    pieces gives those same pieces; BERT's normalizer works per character). Byte-level BPE and
    SentencePiece mark a word by the space before it, so their chunks are tokenised again."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    return (
        type(backend.model).__name__ == "WordPiece"
        and type(backend.pre_tokenizer).__name__ == "BertPreTokenizer"
        and type(backend.normalizer).__name__ in ("BertNormalizer", "NoneType")
    )


def _trims_spaces(tokenizer: Any) -> bool:
    """Whether no token's offsets hold the space before a word (RoBERTa's ``trim_offsets``; WordPiece's
    never do). A post-processor that also adds a prefix space (RoBERTa's with ``add_prefix_space=True``,
    ``ByteLevelBPETokenizer(trim_offsets=True)``'s) still leaves a text's first token its one leading
    space, taking it for the one it added: a piece starts at a space (:func:`_restart`), so its first
    chunk began a character early, with other ids than in the whole text."""
    offsets = call_tokenizer(tokenizer, "a b", add_special_tokens=False, return_offsets_mapping=True)
    return not any(a <= 1 < b for a, b in offsets["offset_mapping"])


def _separates_words(tokenizer: Any, char: str) -> bool:
    """``char`` between two letters leaves them two words after the tokenizer's own normaliser and
    pre-tokenizer (a WordPiece tokenizer behind BERT's pre-tokenizer, see :func:`_slices_match_alone`)."""
    backend = tokenizer.backend_tokenizer
    text = f"a{char}b"
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    return [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(text)] == ["a", "b"]


class _TokenStream:
    """A document's pieces tokenised as the chunker needs them: the text still held
    (:class:`_Window`) and its tokens from global index ``first`` on."""

    def __init__(
        self, pieces: Iterator[str], tokens: Callable[[str, int], list[tuple[int, int, int | None]]]
    ) -> None:
        self.text = _Window()
        self.offsets: list[tuple[int, int, int | None]] = []
        self.first = 0
        self.more = True  # pieces or held text are left to tokenise
        self._pieces = pieces
        self._tokens = tokens
        self._held = ""  # read, not yet tokenised: its last word may go on in the next piece
        self._upcoming = next(pieces, None)

    @property
    def count(self) -> int:
        """Tokens known so far (global index of the next one)."""
        return self.first + len(self.offsets)

    def load_past(self, k: int) -> None:
        """Read on until token ``k`` is known, one past a window, and a line's worth of text after its
        start (:func:`_soft_wrap` reads the next line's first word: a piece may end right after the
        line break), or the document ends."""
        while self.more and (
            k >= self.count or self.offsets[k - self.first][0] + _WRAPPED_LINE > self.text.end
        ):
            self.load()

    def drop_before(self, i: int) -> None:
        """Forget the tokens before ``i`` once they are many, and their text but the lines
        :meth:`TokenChunker._word_start` and :func:`_soft_wrap` look back at."""
        if i - self.first > len(self.offsets) // 2 and i - self.first > 4096:
            self.text.drop_before(self.offsets[i - self.first][0] - 2 * _WRAPPED_LINE)
            del self.offsets[: i - self.first]
            self.first = i

    def load(self) -> None:
        """Tokenise what is read up to the last word a single space sets off (all of it at the
        end): a piece may end inside a word (a URL longer than a piece), and a byte-level BPE
        token holds the space before its word, so a piece's end is no place to restart at."""
        if self._upcoming is None:
            self.more = False
            return
        held = self._held
        scanned = max(len(held) - 1, 1)  # held's spaces before its last char set off no word
        held += self._upcoming
        self._upcoming = next(self._pieces, None)
        cut = len(held) if self._upcoming is None else _restart(held, scanned)
        if not cut:
            if len(held) < _MAX_HELD:
                self._held = held
                return
            cut = len(held)  # no space for a long way (CJK, minified code): at a piece end
        self.offsets.extend(self._tokens(held[:cut], self.text.end))
        self.text.append(held[:cut])
        self._held = held[cut:]
        self.more = self._upcoming is not None or bool(self._held)


class _Window:
    """The text of the pieces still needed, indexed by offsets into the whole document."""

    def __init__(self) -> None:
        self.base = 0
        self.buffer = ""

    @property
    def end(self) -> int:
        return self.base + len(self.buffer)

    def append(self, piece: str) -> None:
        self.buffer += piece

    def drop_before(self, offset: int) -> None:
        if offset > self.base:
            self.buffer = self.buffer[offset - self.base :]
            self.base = offset

    def __getitem__(self, key: int | slice) -> str:
        if isinstance(key, slice):
            return self.buffer[key.start - self.base : key.stop - self.base]
        return self.buffer[key - self.base]


class _Offsets:
    """Token offsets by global token index, over the tokens still held."""

    def __init__(self, offsets: list[tuple[int, int, int | None]], first: int) -> None:
        self.offsets = offsets
        self.first = first

    def __getitem__(self, k: int) -> tuple[int, int, int | None]:
        return self.offsets[k - self.first]
