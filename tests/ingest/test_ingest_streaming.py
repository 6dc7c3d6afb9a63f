"""Issue 13, item 3: files are read, chunked and ingested in bounded pieces, with the same chunks
(ids, offsets, texts) as chunking the whole text at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from ingest_support import RUSTFMT, byte_level_bpe

from poolrag.ingest import Document, TokenChunker, read_paths
from poolrag.ingest.readers import FileDocument, split_pieces

SENTENCES = [
    "Honeybee foragers dance to show where the flowers are.",
    "The Moon's gravity raises two bulges in the oceans!",
    "Sourdough rises with wild yeast; the crust needs steam?",
    "Rust's borrow checker rules out data races: at compile time.",
    "Tiny words.",
]


def _text(paragraphs: int) -> str:
    """Paragraphs of varied length, single line breaks, one paragraph longer than a piece and one
    unbroken string (a single [UNK] token in WordPiece, which must still be cut by tokens)."""
    parts = []
    for p in range(paragraphs):
        body = " ".join(SENTENCES[(p + k) % len(SENTENCES)] for k in range(1 + p % 7))
        if p % 5 == 3:
            body = body.replace(". ", ".\n")
        parts.append(f"Paragraph {p}. {body}")
    parts.insert(7, " ".join(SENTENCES * 40))  # ~10k characters without a blank line
    parts.insert(12, "x" * 3000 + " tail.")
    return "\n\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def chunker(minilm_engine) -> TokenChunker:
    return TokenChunker(minilm_engine.tokenizer, max_tokens=48, overlap=8)


@pytest.mark.parametrize("piece_chars", [1500, 4096, 9999])
def test_streamed_chunks_equal_the_whole_text_chunks(tmp_path: Path, chunker, piece_chars: int) -> None:
    text = _text(300)
    path = tmp_path / "big.txt"
    path.write_text(text)
    (doc,) = read_paths([path])
    assert isinstance(doc, FileDocument)
    pieces = list(doc.pieces(piece_chars))
    assert len(pieces) > 5 and "".join(pieces) == text
    assert pieces == list(split_pieces(text, piece_chars))
    reference = chunker.split(Document(doc.source, text, doc.metadata))  # one tokenizer call
    streamed = list(chunker.iter_chunks(doc, piece_chars))
    assert [(c.id, c.start, c.end, c.text, c.index) for c in streamed] == [
        (c.id, c.start, c.end, c.text, c.index) for c in reference
    ]
    assert all(text[c.start : c.end] == c.text and c.num_tokens <= 48 for c in streamed)


@pytest.mark.parametrize("tokenizer_kind", ["wordpiece", "byte-level BPE", "byte-level BPE, trimmed offsets"])
def test_any_piece_size_gives_the_whole_text_chunks(minilm_engine, tokenizer_kind: str) -> None:
    """A piece could end inside a word (a URL longer than the piece: its tokens restarted mid-word)
    and after a space (byte-level BPE's ``Ġword`` token became ``Ġ`` + ``word``): the piece read
    gave other cuts and ids than the whole text, for 97-character pieces of rustfmt's README. With
    trimmed offsets, a piece's first token (after the space it restarts at) kept that space, which
    the whole text's offsets leave out: a chunk started there as " much Rust", not "much Rust"."""
    if tokenizer_kind == "wordpiece":
        tokenizer = minilm_engine.tokenizer
    else:
        tokenizer = byte_level_bpe(RUSTFMT, 600, trim_offsets=tokenizer_kind.endswith("trimmed offsets"))
    chunker = TokenChunker(tokenizer, max_tokens=24, overlap=6)
    reference = [(c.id, c.start, c.end) for c in chunker.split(Document("README.md", RUSTFMT))]
    assert len(reference) > 5
    for piece_chars in (20, 37, 61, 97, 131, 256):
        streamed = chunker.split(Document("README.md", RUSTFMT), piece_chars)
        assert [(c.id, c.start, c.end) for c in streamed] == reference, piece_chars


def test_a_long_string_without_spaces_is_still_cut_by_tokens(chunker) -> None:
    text = "ab" * 35_000  # 70 KB, one "word"
    chunks = chunker.split(Document("blob.txt", text))
    assert len(chunks) > 10 and max(len(c.text) for c in chunks) < 10_000
    assert all(text[c.start : c.end] == c.text for c in chunks) and chunks[-1].end == len(text)


def test_text_held_piece_after_piece_is_scanned_for_a_restart_once(chunker) -> None:
    """Text read in pieces is held until a word set off by a single space starts (a restart point);
    each piece rescanned every held space from the start: a column-aligned text whose words are all
    set off by two spaces took 5x as long as before at 4 Ki pieces (1.4 s -> 6.8 s for 2 MB, and
    more the smaller the pieces). Counted in calls to ``str.rfind`` from ``_restart``."""
    text = "  ".join(f"w{k}" for k in range(8000))  # ~54k characters, no single space
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "c_call" and frame.f_code.co_name == "_restart" and arg.__name__ == "rfind":
            calls += 1

    sys.setprofile(count)
    try:
        streamed = chunker.split(Document("columns.txt", text), 500)
    finally:
        sys.setprofile(None)
    whole = chunker.split(Document("columns.txt", text))
    assert len(whole) > 1 and [(c.id, c.end) for c in streamed] == [(c.id, c.end) for c in whole]
    assert calls <= text.count(" ") + len(text) // 500 + 10, calls  # each space once, one miss a piece


def test_a_large_file_is_chunked_in_bounded_memory(tmp_path: Path, minilm_path: Path) -> None:
    """Reading + chunking a 6 MB file (what scaled with the file: the whole-text path grew by about
    120x the file size, 6.3 GB for 50 MB) grows peak RSS by less than 20x the file size; streaming
    holds one piece, so the growth is a constant (tens of MB) whatever the size."""
    path = tmp_path / "big.txt"
    paragraph = " ".join(SENTENCES) + "\n\n"
    with path.open("w") as handle:
        for k in range(6_000_000 // len(paragraph)):
            handle.write(f"{k} {paragraph}")
    size = path.stat().st_size
    script = textwrap.dedent(
        f"""
        import json
        from transformers import AutoTokenizer
        from poolrag.ingest import Document, TokenChunker, read_paths

        def status_kib(field):
            for line in open("/proc/self/status"):
                if line.startswith(field):
                    return int(line.split()[1])

        tokenizer = AutoTokenizer.from_pretrained({str(minilm_path)!r})
        chunker = TokenChunker(tokenizer, max_tokens=256, overlap=32)
        chunker.split(Document("warm-up", open({str(path)!r}).read(300_000)))
        before = status_kib("VmRSS:")
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # reset the peak (VmHWM) to the current RSS
        count = sum(1 for doc in read_paths([{str(path)!r}]) for _ in chunker.iter_chunks(doc))
        peak = status_kib("VmHWM:")
        print(json.dumps({{"chunks": count, "before": before, "peak": peak}}))
        """
    )
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux /proc")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    growth = (result["peak"] - result["before"]) * 1024
    assert result["chunks"] > 5_000
    assert growth < 20 * size, (
        f"peak RSS grew by {growth / 1e6:.0f} MB for a {size / 1e6:.0f} MB file: {result}"
    )


def test_the_pipeline_writes_while_it_reads(tmp_path: Path, minilm_engine) -> None:
    """Documents are consumed one at a time: chunks of the first are stored before the last is
    read, so memory never holds the corpus's chunks (and a re-run still adds nothing)."""
    from poolrag.cache import CachedEmbedder
    from poolrag.ingest import DenseEncoder, IngestPipeline
    from poolrag.stores import open_store

    store = open_store("qdrant", "docs", path=str(tmp_path / "q"))
    counts: list[int] = []

    def documents():
        for k in range(6):
            counts.append(store.count() if k else 0)
            yield Document(f"doc-{k}", f"Document {k}. " + " ".join(SENTENCES * 3))

    def pipeline() -> IngestPipeline:
        return IngestPipeline(
            store,
            DenseEncoder(CachedEmbedder(minilm_engine)),
            TokenChunker(minilm_engine.tokenizer, max_tokens=24, overlap=4),
            batch_size=4,
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        )

    report = pipeline().run(documents())
    assert counts[-1] > 0 and counts == sorted(counts)  # stored while later documents were unread
    assert store.count() == report.upserted == report.chunks
    again = pipeline().run(documents())
    assert (again.upserted, again.embedded, again.chunks_existing) == (0, 0, report.chunks)
    store.close()
