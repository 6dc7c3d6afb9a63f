"""TokenChunker: token-bounded, overlapping, offset-faithful chunks with stable ids."""

from __future__ import annotations

import itertools
import json
import shutil
import textwrap
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidInputError
from poolrag.ingest import Document, TokenChunker, read_paths
from poolrag.ingest.chunker import MAX_CHUNK_BYTES

PARAGRAPH = (
    "Honeybees communicate through the waggle dance. The angle of the dance points to the food, and its "
    "duration tells the distance. Colonies reproduce by swarming when the old queen leaves."
)
TEXT = "\n\n".join(f"Section {i}. {PARAGRAPH}" for i in range(8))


@pytest.fixture(scope="module")
def tokenizer(minilm_engine):
    return minilm_engine.tokenizer


def _count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _ends_sentence(text: str, end: int) -> bool:
    return (text[end - 1] in ".!?:;" and text[end : end + 1].isspace()) or text[end : end + 1] == "\n"


def test_chunks_fit_the_budget_keep_offsets_and_overlap_only_inside_sentences(tokenizer) -> None:
    chunks = TokenChunker(tokenizer, max_tokens=48, overlap=8).split(Document("doc.md", TEXT, {"lang": "en"}))
    assert len(chunks) > 5
    for chunk in chunks:
        assert TEXT[chunk.start : chunk.end] == chunk.text
        assert chunk.num_tokens == _count(tokenizer, chunk.text) <= 48
        assert list(chunk.token_ids) == tokenizer(chunk.text, add_special_tokens=False)["input_ids"]
        assert chunk.start == 0 or TEXT[chunk.start - 1].isspace()  # never starts inside a word
        assert chunk.payload()["source"] == "doc.md" and chunk.payload()["lang"] == "en"
        assert "token_ids" not in chunk.payload()
    overlapped = 0
    for prev, nxt in itertools.pairwise(chunks):
        if _ends_sentence(TEXT, prev.end):  # a clean cut: the next chunk starts after it
            assert prev.end <= nxt.start and not TEXT[prev.end : nxt.start].strip()
        else:  # a cut inside a sentence: the chunks share its words
            assert prev.start < nxt.start < prev.end
            overlapped += 1
    assert overlapped < len(chunks) - 1  # most cuts found a sentence end in these paragraphs
    assert chunks[0].start == 0 and chunks[-1].end == len(TEXT.rstrip())
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_a_chunk_starts_at_a_word_when_its_overlap_falls_inside_a_long_one(tokenizer) -> None:
    """Words of more word pieces than the overlap (quasar: qu ##asa ##r): the next chunk takes the
    whole word rather than start inside it (it started at 'lsar' of 'pulsar')."""
    words = ["orbit", "comet", "nebula", "quasar", "pulsar", "galaxy"]
    text = "\n".join(" ".join(words[(line + k) % 6] for k in range(6)) + "." for line in range(3))
    chunks = TokenChunker(tokenizer, max_tokens=8, overlap=2).split(Document("d", text))
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.start == 0 or text[chunk.start - 1].isspace(), chunk.text


def test_text_without_sentence_ends_overlaps_at_every_cut(tokenizer) -> None:
    text = " ".join(f"word{i} and more" for i in range(80))
    chunks = TokenChunker(tokenizer, max_tokens=40, overlap=8).split(Document("d", text))
    assert len(chunks) > 3
    for prev, nxt in itertools.pairwise(chunks):
        shared = _count(tokenizer, text[nxt.start : prev.end])
        assert prev.start < nxt.start < prev.end and 1 <= shared <= 8


def test_a_cut_without_a_sentence_end_falls_between_words(tokenizer) -> None:
    """A list or a table row with no full stop: the chunk ends after a whole word (it ended in
    'puls' of 'pulsar', a fragment shown in search results and embedded with the chunk)."""
    words = ["orbit", "quasar", "pulsar", "nebulosity", "magnetar", "exoplanet"]
    text = " ".join(words[k % 6] for k in range(120))
    chunks = TokenChunker(tokenizer, max_tokens=23, overlap=4).split(Document("d", text))
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.end == len(text) or text[chunk.end].isspace(), chunk.text
        assert chunk.start == 0 or text[chunk.start - 1].isspace(), chunk.text


def test_always_overlap_repeats_text_after_sentence_ends_too(tokenizer) -> None:
    doc = Document("doc.md", TEXT)
    default = TokenChunker(tokenizer, max_tokens=48, overlap=8).split(doc)
    always = TokenChunker(tokenizer, max_tokens=48, overlap=8, always_overlap=True).split(doc)
    for prev, nxt in itertools.pairwise(always):
        assert prev.start < nxt.start < prev.end
    assert len(default) < len(always)  # the overlap after clean cuts is what the extra chunks cost
    assert sum(c.num_tokens for c in default) < sum(c.num_tokens for c in always)


def test_cuts_prefer_paragraph_and_sentence_ends(tokenizer) -> None:
    chunks = TokenChunker(tokenizer, max_tokens=60, overlap=0).split(Document("d", TEXT))
    assert all(c.text.rstrip().endswith((".", "!", "?")) for c in chunks)


@pytest.mark.parametrize(("sentences", "cut_at_paragraph"), [(10, True), (8, False)])
def test_a_paragraph_end_wins_only_in_the_windows_last_fifth(
    tokenizer, sentences: int, cut_at_paragraph: bool
) -> None:
    first = " ".join(["Bees dance at noon."] * sentences)  # 5 tokens a sentence
    text = first + "\n\n" + " ".join(["Owls hunt at night."] * 12)
    chunk = TokenChunker(tokenizer, max_tokens=60, overlap=0).split(Document("d", text))[0]
    if cut_at_paragraph:  # 50 of 60 tokens: the paragraph end is near enough to beat later sentences
        assert chunk.text == first
    else:  # 40 of 60: too early, the last sentence end that fits wins (more text per chunk)
        assert chunk.text.startswith(first + "\n\n") and chunk.text.endswith("night.")
        assert chunk.num_tokens > 50


WRAPPED = (
    "The chunker measures every window in the tokens the model reads, so no chunk is cut short "
    "at embedding time, and it prefers to end a chunk where a sentence ends in the text. "
    "A document wrapped at a fixed width has a line break every few words, and such a break "
    "is only a space between two words of the same sentence. "
)


@pytest.mark.parametrize("indent", ["", "       "])  # Markdown/RST, and a man page as `man` renders it
def test_hard_wrapped_prose_is_cut_at_a_sentence_end_not_a_wrapped_line(tokenizer, indent: str) -> None:
    """Text wrapped at 72 columns: a line break inside a sentence is no line end. Counted as one,
    the last in the window beat the sentence end a few tokens before it, so chunks ended mid-sentence
    ("...so no chunk is cut short" / "at embedding time") with no overlap to make the sentence whole."""
    text = textwrap.fill(WRAPPED * 12, width=72, initial_indent=indent, subsequent_indent=indent)
    chunks = TokenChunker(tokenizer, max_tokens=80, overlap=8).split(Document("wrapped.rst", text))
    assert len(chunks) > 5
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.text.endswith("."), prev.text[-60:]
        assert prev.end <= nxt.start  # a clean cut: nothing repeated


TABLE = "\n".join(
    ["| Setting | What it changes", "| --- | ---"]  # rows without a closing pipe end in a word
    + [f"| option {i} | sets the size of the cache used by worker number {i} on start" for i in range(40)]
)
CODE = (
    "```python\n"
    + "\n".join(
        f"    # load batch number {i} of the input stream and normalise its rows\n"
        f"    batch = reader.read(batch_size, offset=start + {i} * batch_size) or default_batch\n"
        f"    total_{i} = sum(row.value * row.weight for row in batch) * scale_factor"
        for i in range(20)
    )
    + "\n```"
)
LIST = "\n".join(f"- item {i} keeps the settings of the worker pool and its cache sizes" for i in range(40))


@pytest.mark.parametrize("text", [TABLE, CODE, LIST], ids=["table", "code", "list"])
def test_table_rows_code_lines_and_list_items_are_still_cut_at_their_line_ends(tokenizer, text) -> None:
    """Lines ending in a word are no wrapped prose when the next one starts a row, an identifier, a
    comment's code or a list item: preferring sentence ends or treating such lines as wrapped cut
    table cells and code lines in two."""
    chunks = TokenChunker(tokenizer, max_tokens=60, overlap=8).split(Document("doc.md", text))
    assert len(chunks) > 5
    for prev, nxt in itertools.pairwise(chunks):
        assert text[prev.end] == "\n", prev.text[-60:]
        assert prev.end <= nxt.start


@pytest.fixture(scope="module")
def bpe() -> PreTrainedTokenizerFast:
    """A byte-level BPE (RoBERTa, GPT-2, Qwen, ModernBERT): line breaks and indents are tokens."""
    trained = ByteLevelBPETokenizer()
    trained.train_from_iterator([WRAPPED] * 20, vocab_size=400, min_frequency=1, show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer)


def test_a_long_line_before_a_deep_indent_is_chunked_with_a_byte_level_bpe(bpe) -> None:
    """A byte-level BPE gives the line break and the spaces after it tokens of their own: 40 or
    more spaces of indent after a full line left no word to read past the break, and chunking
    raised IndexError instead of cutting there."""
    line = "a long line of prose that keeps going on and on until its last word"
    text = (line + "\n" + " " * 50 + "next words here ") * 40
    chunks = TokenChunker(bpe, max_tokens=16, overlap=2).split(Document("indented.txt", text))
    assert len(chunks) > 5
    assert all(text[c.start : c.end] == c.text for c in chunks)


@pytest.mark.parametrize("piece_chars", [100, 211, 379])
def test_wrapped_prose_read_in_pieces_is_chunked_as_the_whole_text(bpe, piece_chars: int) -> None:
    """Files are read in pieces ending after a line break where no blank line is near; with a
    byte-level BPE the break is the last token read, and the next line's first word (which says
    whether the break only wraps prose) was not read yet: chunking raised IndexError, or cut
    elsewhere than the whole text's chunks."""
    text = textwrap.fill(WRAPPED * 12, width=72)
    for size in (20, 40, 80):
        chunker = TokenChunker(bpe, max_tokens=size, overlap=4)
        whole = [(c.start, c.end) for c in chunker.split(Document("wrapped.txt", text))]
        pieces = chunker.split(Document("wrapped.txt", text), piece_chars=piece_chars)
        assert [(c.start, c.end) for c in pieces] == whole


def test_windows_line_ends_in_a_record_are_cut_at_as_unix_ones(tokenizer, tmp_path) -> None:
    """A JSONL record's (or CSV cell's) text keeps its ``\\r\\n`` line ends (only files are read
    with universal newlines); its blank lines and line ends are still paragraph and line ends, so
    it is chunked as the same text with ``\\n`` (it was cut mid-sentence, with overlap, instead)."""
    paragraphs = [f"Step {i} of the setup copies the files to the shared folder and waits" for i in range(8)]
    unix = "\n\n".join(p + "\nthen checks the log for errors" for p in paragraphs)
    windows = unix.replace("\n", "\r\n")
    (tmp_path / "faq.jsonl").write_text(json.dumps({"id": "q1", "text": windows}) + "\n")
    [record] = read_paths(tmp_path)
    assert record.text == windows
    chunker = TokenChunker(tokenizer, max_tokens=60, overlap=8)
    expected = [c.text for c in chunker.split(Document("d", unix))]
    chunks = chunker.split(record)
    assert [c.text.replace("\r\n", "\n") for c in chunks] == expected
    assert all(windows[c.start : c.end] == c.text for c in chunks)
    assert all(c.text.endswith("errors") for c in chunks)


def test_chunks_of_a_model_with_a_document_prompt_leave_room_for_it(minilm_path, tmp_path) -> None:
    """MiniLM (256 tokens) given e5's ``passage: `` document prompt: the default 254-token chunks
    plus the prompt's 3 tokens were 259, and the engine cut each full chunk's last words silently."""
    folder = tmp_path / "prompted"
    shutil.copytree(minilm_path, folder)
    settings = folder / "config_sentence_transformers.json"
    config = json.loads(settings.read_text()) | {"prompts": {"query": "query: ", "document": "passage: "}}
    settings.write_text(json.dumps(config))
    engine = Engine(folder)
    assert engine.document_prompt == "passage: "
    chunker = TokenChunker.for_model(engine.tokenizer, engine.facts, prompt=engine.document_prompt)
    text = " ".join(f"The reading of gauge {i} was noted in the log" for i in range(80))
    longest = max(chunker.split(Document("d", text)), key=lambda c: c.num_tokens)
    refuse_long = PoolingParams(input_type="document", truncate=False)
    [output] = engine.embed([longest.text], pooling_params=refuse_long)  # over 256: InvalidInputError
    assert len(output.prompt_token_ids) <= 256
    with pytest.raises(InvalidInputError, match="document prompt"):
        TokenChunker.for_model(engine.tokenizer, engine.facts, 254, prompt=engine.document_prompt)


def test_ids_are_stable_and_only_edited_chunks_change(tokenizer) -> None:
    chunker = TokenChunker(tokenizer, max_tokens=48, overlap=8)
    before = chunker.split(Document("doc.md", TEXT))
    assert [c.id for c in before] == [c.id for c in chunker.split(Document("doc.md", TEXT))]
    edited = TEXT[: before[-1].start] + TEXT[before[-1].start :].replace("swarming", "swarmings")
    after = chunker.split(Document("doc.md", edited))
    changed = {c.id for c in after} ^ {c.id for c in before}
    assert len(changed) == 2  # the last chunk's old and new versions
    assert {c.id for c in chunker.split(Document("other.md", TEXT))}.isdisjoint({c.id for c in before})


def test_repeated_text_in_one_document_keeps_distinct_chunks(tokenizer) -> None:
    text = "Same sentence here.\n\n" * 6
    chunks = TokenChunker(tokenizer, max_tokens=5, overlap=0).split(Document("d", text))
    assert len(chunks) == len({c.id for c in chunks}) == 6


def test_sizes_follow_the_model_and_bad_settings_are_refused(minilm_engine, tokenizer) -> None:
    chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts)
    assert chunker.max_tokens == 254  # MiniLM: 256 positions minus [CLS] and [SEP]
    with pytest.raises(InvalidInputError, match="exceeds"):
        TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, max_tokens=300)
    with pytest.raises(InvalidInputError, match="overlap"):
        TokenChunker(tokenizer, max_tokens=10, overlap=10)
    # the default overlap (32) is at most a quarter of a chunk; a given one that does not fit is refused
    assert TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts).overlap == 32
    assert TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, max_tokens=16).overlap == 4
    with pytest.raises(
        InvalidInputError, match=r"overlap must be between 0 and chunk size - 1 \(99\), got 300"
    ):
        TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, max_tokens=100, overlap=300)
    assert TokenChunker(tokenizer, max_tokens=10).split(Document("d", "   \n ")) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(
        st.sampled_from(["alpha", "beta.", "gamma,", "\n\n", "tokenization", "x", "naïve", "日本"]),
        max_size=120,
    ),
    size=st.integers(min_value=4, max_value=40),
)
def test_any_text_is_covered_within_budget(tokenizer, words: list[str], size: int) -> None:
    text = " ".join(words)
    chunks = TokenChunker(tokenizer, max_tokens=size, overlap=size // 4).split(Document("d", text))
    covered = set()
    for c in chunks:
        assert text[c.start : c.end] == c.text and c.num_tokens <= size
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_chunks_are_bounded_in_bytes_when_few_tokens_span_a_megabyte(tokenizer) -> None:
    """Issue 27, item 4: one letter and 500,000 combining accents (an uncased tokenizer drops them, so
    the text has 3 tokens) becomes many chunks of at most ``MAX_CHUNK_BYTES``, the text all kept."""
    text = "a" + "\u0301" * 500_000 + " and then some words."
    chunks = TokenChunker(tokenizer, max_tokens=254, overlap=32).split(Document("accents.txt", text))
    assert len(chunks) > 30
    assert all(len(c.text.encode("utf-8")) <= MAX_CHUNK_BYTES for c in chunks)
    assert all(text[c.start : c.end] == c.text for c in chunks)
    covered = sum(c.end - c.start for c in chunks)
    assert covered >= len(text) - 10  # the accents are stored, not dropped between two tokens


def test_a_lone_surrogate_is_a_clear_error_naming_the_source(tokenizer) -> None:
    with pytest.raises(InvalidInputError, match=r"rec#7: text is not valid Unicode \(lone surrogate"):
        TokenChunker(tokenizer, max_tokens=16).split(Document("rec#7", "bad \udfff text"))


def test_chinese_and_japanese_sentences_end_at_their_full_stops(tokenizer) -> None:
    """。！？ end a sentence with no space after them: every cut fell inside a sentence (2 of 32
    chunks of this text ended one) and repeated its overlap (992 characters embedded twice)."""
    sentences = [
        "北京是中华人民共和国的首都。",
        "它是一个历史悠久的城市，拥有许多名胜古迹。",
        "每年都有大量游客前来参观！",
        "你去过长城吗？",
        "パスワードを忘れた場合は、ログイン画面のリンクから再設定してください。",
    ]
    text = "".join(sentences[(i * 7) % 5] for i in range(400))
    chunks = TokenChunker(tokenizer, max_tokens=254).split(Document("zh.txt", text))
    assert all(c.text.endswith(("。", "！", "？")) for c in chunks)
    assert "".join(c.text for c in chunks) == text  # nothing repeated, nothing lost


@pytest.mark.parametrize(
    "word",
    [
        "में",  # Hindi: the vowel sign and the nasal mark are nonspacing
        "ที่",  # Thai: a vowel and a tone mark above the consonant
        unicodedata.normalize("NFD", "café"),  # a decomposed accent
    ],
)
def test_a_chunk_keeps_the_marks_that_end_its_last_word(tokenizer, word: str) -> None:
    """An uncased tokenizer drops nonspacing marks, so a word's last token ended before them: each
    chunk showed ``में`` as ``म``, and the document's last marks were in no chunk at all."""
    text = " ".join([word] * 300)
    chunks = TokenChunker(tokenizer, max_tokens=16).split(Document("marks.txt", text))
    assert len(chunks) > 5
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text.split() == [word] * len(chunk.text.split())
    assert chunks[-1].end == len(text)
