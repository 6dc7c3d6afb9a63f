"""Late chunking's input side: one document's tokens as model windows, each chunk span as rows.

Late chunking embeds a long document once and pools one vector per chunk from the rows of that
forward pass, so every chunk's vector has read the text around it. Character spans become token
rows through the fast tokenizer's offsets (a token belongs to a span when their character ranges
overlap, the space a token folds in before its word not counted). A document longer than the
model's window runs as windows of the maximum length that overlap by a quarter of a window; each
chunk takes all its rows from one window that holds the whole chunk, among those the one where it
sits farthest from an edge (most context on both sides). A chunk that fits a window but straddles
two of them (the usual case when chunks are nearly as long as the window, as ``ingest``'s default
chunks are) gets a window of its own, centred on it: pooled from the window holding most of it, it
would lose up to a third of its tokens, text its vector then never read. A chunk longer than a
window pools the part inside the fixed window holding most of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.tokenization.tokenizer_lock import call_tokenizer

if TYPE_CHECKING:  # the cache checks spans with this module and needs no transformers for it
    from poolrag.tokenization.input_processor import InputProcessor

LATE_CHUNK_TASK = "late_chunks"  # the pooler that averages the row spans of a LateChunkRequest
#: The cache's namespace for late vectors. Before chunks straddling two windows got a window of their
#: own ("late_chunks") they pooled part of their tokens; then ("late_chunks/whole_spans") such a chunk
#: could read another chunk's centred window, so its vector hung on the spans sent with it. Each new
#: name keeps the older vectors from answering (and those that counted a byte-level or SentencePiece
#: token's folded-in space as part of its span).
LATE_CHUNKS_CACHE_TASK = "late_chunks/own_windows"


def late_chunking_refused(pooling_type: str | None, facts: ModelFacts) -> str:
    """Why a model cannot late-chunk, in the words every door uses (no model name: over HTTP that
    would be the host's folder path, and every caller knows which model it asked)."""
    if facts.reads_images:
        return (
            "late-chunking needs a mean-pooling text model; this model embeds texts and images "
            "by one pooled token of each tower, which has no part per chunk"
        )
    if facts.score_kind is ScoreKind.MAXSIM:  # its pooler config's CLS default is not what it does
        return (
            "late-chunking needs a mean-pooling model; this model is ColBERT, which keeps one vector "
            "per token and pools none"
        )
    return (
        f"late-chunking needs a mean-pooling model; this model pools by {pooling_type}, "
        "whose vector has no part per chunk"
    )


WINDOW_OVERLAP = 0.25  # of a window's content tokens, shared with the next window


@dataclass(frozen=True, slots=True)
class LateChunkRequest(PoolingRequest):
    """One window of a document; ``row_spans`` are ``[start, end)`` rows pooled into one vector each."""

    row_spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class LateChunkPlan:
    """The windows to run and, per chunk span in the caller's order, (window, vector in it)."""

    windows: list[LateChunkRequest]
    placement: list[tuple[int, int]]


def check_spans(document: str, spans: object) -> list[tuple[int, int]]:
    """``spans`` as ``(start, end)`` character pairs inside ``document``; one-line errors naming the span.

    Overlapping spans are allowed (chunkers with overlap produce them); empty ones are not.
    """
    if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
        raise InputTypeError(f"spans must be a list of [start, end] pairs, not {type(spans).__name__}")
    if not spans:
        raise InvalidInputError("spans is empty: give at least one [start, end] chunk span")
    checked = []
    for i, span in enumerate(spans):
        if (
            isinstance(span, (str, bytes))
            or not isinstance(span, Sequence)
            or len(span) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in span)
        ):
            raise InputTypeError(f"spans[{i}] must be a [start, end] pair of integers, not {span!r}")
        start, end = span
        if start >= end:
            raise InvalidInputError(f"spans[{i}] = [{start}, {end}] is empty (start must be below end)")
        if not 0 <= start < end <= len(document):
            raise InvalidInputError(
                f"spans[{i}] = [{start}, {end}] is outside the document (0 <= start < end <= {len(document)})"
            )
        checked.append((start, end))
    return checked


def _word_offsets(text: str, offsets: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each token's characters less the space before its word: byte-level (``Ġword``) and
    SentencePiece (``▁word``) tokenizers fold that space into the token, which would make the first
    word after a prompt ``passage: `` a prompt token, and a word after a span ending in a space a
    token of both spans. A token of whitespace only keeps its characters."""
    moved = []
    for a, b in offsets:
        word = text[a:b]
        moved.append((a + len(word) - len(word.lstrip()) if word.strip() else a, b))
    return moved


def _token_span(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The content tokens ``[first, last + 1)`` whose characters overlap ``[start, end)``."""
    hits = [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
    return (hits[0], hits[-1] + 1) if hits else None


def _window_starts(length: int, width: int) -> list[int]:
    if length <= width:
        return [0]
    stride = max(1, width - int(width * WINDOW_OVERLAP))
    return [*range(0, length - width, stride), length - width]


def _best_window(starts: Sequence[int], width: int, first: int, stop: int) -> int:
    """The window holding most of tokens ``[first, stop)``, then the one with the widest margin."""

    def rank(w: int) -> tuple[int, int]:
        ws = starts[w]
        covered = min(stop, ws + width) - max(first, ws)
        return covered, min(first - ws, ws + width - stop)

    return max(range(len(starts)), key=rank)


def _window_for(starts: list[int], fixed: int, length: int, width: int, first: int, stop: int) -> int:
    """The window tokens ``[first, stop)`` read: the best fixed one (the first ``fixed`` of
    ``starts``) holding all of them, else the one centred on them (appended to ``starts`` unless
    another chunk's is the same window); a chunk longer than ``width`` takes the fixed one holding
    most of it. The choice depends on the chunk alone, never on the other spans of the call, so a
    chunk's vector is the same whichever spans it is sent with (ingest batches, cache hits)."""
    if stop - first > width:
        return _best_window(starts[:fixed], width, first, stop)
    holding = [w for w in range(fixed) if starts[w] <= first and stop <= starts[w] + width]
    if holding:
        return max(holding, key=lambda w: min(first - starts[w], starts[w] + width - stop))
    centred = min(max(0, first - (width - (stop - first)) // 2), length - width)
    if centred in starts[fixed:]:
        return starts.index(centred, fixed)
    starts.append(centred)
    return len(starts) - 1


def plan_late_chunks(
    processor: InputProcessor,
    document: str,
    spans: Sequence[tuple[int, int]],
    params: ResolvedParams,
    prefix: str = "",
) -> LateChunkPlan:
    """Tokenise ``prefix + document`` once and lay its chunk spans out over model windows.

    ``document`` and ``spans`` are checked already (:func:`check_spans`); the spans index
    ``document``, not the prefix. The prefix (a document prompt such as ``passage: ``) opens every
    window, not only the first: per-chunk ``embed`` gives each chunk its prompt too.
    """
    head, content, tail, offsets = _document_tokens(processor, prefix, document)
    width = processor.max_len - len(head) - len(tail)
    if width < 1:
        raise InvalidInputError(
            f"the model's maximum length {processor.max_len} leaves no room for text after the prompt"
        )
    token_spans = []
    for i, (start, end) in enumerate(spans):
        rows = _token_span(offsets, start + len(prefix), end + len(prefix))
        if rows is None:
            raise InvalidInputError(f"spans[{i}] = [{start}, {end}] covers no token (only whitespace?)")
        token_spans.append(rows)
    starts, per_window, placement = _laid_out(token_spans, len(content), width, len(head))
    windows = []
    for w, ws in enumerate(starts):
        if not per_window[w]:
            continue
        ids = tuple(head + content[ws : ws + width] + tail)
        types = (0,) * len(ids) if processor.uses_token_type_ids else None
        windows.append(
            LateChunkRequest(
                token_ids=ids, params=params, token_type_ids=types, row_spans=tuple(per_window[w])
            )
        )
    # windows no chunk needs are not run: renumber the placement to the windows kept
    kept = {w: n for n, w in enumerate(w for w in range(len(starts)) if per_window[w])}
    return LateChunkPlan(windows, [(kept[w], j) for w, j in placement])


def _document_tokens(
    processor: InputProcessor, prefix: str, document: str
) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
    """``prefix + document`` tokenised once, as (the special tokens and the prompt's that open every
    window, the document's tokens, the special tokens that close every window, the document's
    tokens' character offsets)."""
    text = prefix + document
    encoded = call_tokenizer(
        processor.tokenizer,
        text,
        add_special_tokens=True,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    ids: list[int] = encoded["input_ids"]
    special = encoded["special_tokens_mask"]
    lead = next((i for i, s in enumerate(special) if not s), len(ids))
    trail = len(ids) - next((i for i, s in enumerate(reversed(special)) if not s), 0)
    offsets = _word_offsets(text, encoded["offset_mapping"][lead:trail])
    # the prompt's tokens open every window, as they open every text the model was trained on
    prompt = next((i for i, (a, _) in enumerate(offsets) if a >= len(prefix)), len(offsets))
    return ids[: lead + prompt], ids[lead + prompt : trail], ids[trail:], offsets[prompt:]


def _laid_out(
    token_spans: Sequence[tuple[int, int]], length: int, width: int, head: int
) -> tuple[list[int], list[list[tuple[int, int]]], list[tuple[int, int]]]:
    """Each chunk's tokens (of ``length`` content tokens) placed in a window of ``width`` behind
    ``head`` opening tokens: (every window's start, the rows each pools, per chunk (window, vector
    in it))."""
    starts = _window_starts(length, width)
    fixed = len(starts)
    per_window: list[list[tuple[int, int]]] = [[] for _ in starts]
    placement = []
    for first, stop in token_spans:
        w = _window_for(starts, fixed, length, width, first, stop)
        if w == len(per_window):
            per_window.append([])
        ws = starts[w]
        placement.append((w, len(per_window[w])))
        per_window[w].append((head + max(first, ws) - ws, head + min(stop, ws + width) - ws))
    return starts, per_window, placement
