"""A PDF given to a text model: its text layer is chunked as one text, each chunk names the page it
starts on, a re-run stores nothing new, and a PDF that cannot be read is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_support import read_folder

from poolrag.cache import CachedEmbedder
from poolrag.cli import main
from poolrag.ingest import DenseEncoder, Document, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.pdf_text import read_pdf_text
from poolrag.retrieval import Retriever
from poolrag.stores import open_store
from poolrag.testing.page_corpus import write_pdf

pytest.importorskip("pypdfium2", reason="a PDF's text needs the pdf extra (pypdfium2)")
pytest.importorskip("matplotlib", reason="the PDFs are written by matplotlib (test extra)")

#: each page's own words, so a chunk's first word says which page it starts on
VOCABULARY = [  # one token each in MiniLM's vocabulary
    ["honey", "bee", "flower", "garden", "farm", "bread"],
    ["ship", "sea", "boat", "water", "river", "harbor"],
    ["star", "moon", "sun", "sky", "planet", "space"],
]


def _page(words: list[str]) -> str:
    """Three lines of six words (write_pdf's lines fit its page): several chunks at 8 tokens a chunk."""
    return "\n".join(" ".join(words[(line + k) % len(words)] for k in range(6)) + "." for line in range(3))


@pytest.fixture
def report(tmp_path: Path) -> Path:
    return write_pdf(tmp_path / "report.pdf", [_page(words) for words in VOCABULARY])


def test_each_chunk_names_the_page_its_text_starts_on(report: Path, minilm_engine) -> None:
    (doc,) = read_paths([report])
    assert isinstance(doc, Document) and doc.metadata == {"filename": "report.pdf"}
    assert len(doc.page_starts) == 3
    chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, 8, 2)
    chunks = chunker.split(doc)
    assert len(chunks) > 6  # several chunks a page
    for chunk in chunks:
        first_word = chunk.text.split()[0].strip(".")
        assert first_word in VOCABULARY[chunk.metadata["page"] - 1], (chunk.metadata, chunk.text)
        assert chunk.metadata["filename"] == "report.pdf"
    assert {c.metadata["page"] for c in chunks} == {1, 2, 3}


def test_a_chunk_over_several_pages_names_its_last_one_too(
    report: Path, minilm_engine, minilm_path: Path, tmp_path: Path, capsys
) -> None:
    """Three short pages in one chunk: ``page`` 1 and ``last_page`` 3, and search says "pages 1-3"
    (seen from outside: text from page 3 was cited as "page 1")."""
    (doc,) = read_paths([report])
    (chunk,) = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, 200, 0).split(doc)
    assert (chunk.metadata["page"], chunk.metadata["last_page"]) == (1, 3)
    small = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, 8, 2).split(doc)
    for piece in small:  # each spans at most the page its text starts on and the next
        last = piece.metadata.get("last_page", piece.metadata["page"])
        assert last - piece.metadata["page"] <= 1
        last_word = piece.text.split()[-1].strip(".")
        assert last_word in VOCABULARY[last - 1], (piece.metadata, piece.text)
    store = ["--model", str(minilm_path), "--store", "qdrant", "--path", str(tmp_path / "q")]
    store += ["--collection", "r"]
    assert main(["ingest", str(report), *store, "--chunk-tokens", "200", "--no-cache", "-q"]) == 0
    capsys.readouterr()
    assert main(["search", VOCABULARY[2][0], *store, "-k", "1"]) == 0
    assert f"{report.resolve()} pages 1-3" in capsys.readouterr().out


def test_a_word_hyphenated_at_a_line_end_reads_whole(tmp_path: Path) -> None:
    """pdfium marks where it dropped a line-end hyphen with \\x02 (seen in a real manual's text:
    'manip\\x02ulation'), which a tokenizer reads as a character inside the word: it is dropped."""
    doc = read_pdf_text(write_pdf(tmp_path / "a.pdf", ["The rules allow manip-\nulation of the data."]))
    assert "manipulation of the data" in doc.text and "\x02" not in doc.text


def test_the_digest_is_the_text_and_where_its_pages_start(tmp_path: Path) -> None:
    """The checkpoint's proof that a document is unchanged: a PDF given a picture (new bytes, the same
    text) is unchanged for a text model; the same text cut into pages elsewhere is not (its chunks
    name other pages)."""
    one = read_pdf_text(write_pdf(tmp_path / "a.pdf", ["alpha beta", "gamma delta"]))
    again = read_pdf_text(write_pdf(tmp_path / "b.pdf", ["alpha beta", "gamma delta"], photo_on=1))
    assert (tmp_path / "a.pdf").read_bytes() != (tmp_path / "b.pdf").read_bytes()
    assert one.digest == again.digest
    elsewhere = Document(one.source, one.text, one.metadata, (0, one.page_starts[1] - 1))
    assert elsewhere.digest != one.digest


def test_a_pdf_is_stored_searched_by_its_words_and_a_rerun_adds_nothing(
    report: Path, tmp_path: Path, minilm_engine
) -> None:
    store = open_store("qdrant", "pdfs", path=str(tmp_path / "qdrant"))
    try:
        chunker = TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, 8, 2)
        encoder = CachedEmbedder(minilm_engine, None)

        def run():
            pipeline = IngestPipeline(
                store, DenseEncoder(encoder), chunker, checkpoint_dir=tmp_path / "ck", progress=False
            )
            return pipeline.run(read_paths([report]))

        first = run()
        assert first.documents == 1 and first.upserted == first.chunks > 6
        hits = Retriever(store, minilm_engine).search("moon and stars in the sky", k=3)
        assert [hit.payload["page"] for hit in hits] == [3, 3, 3]
        assert all(hit.payload["source"] == report.resolve().as_posix() for hit in hits)
        again = run()
        assert again.upserted == again.embedded == again.deleted == 0
        assert again.chunks_existing == first.chunks
    finally:
        store.close()


def test_a_pdf_a_text_model_cannot_use_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.txt").write_text("A short note about honey and wax.")
    write_pdf(folder / "scanned.pdf", [""], photo_on=0)  # a picture and no text layer
    (folder / "fake.pdf").write_text("not a PDF at all")
    (folder / "empty.pdf").write_bytes(b"")
    read, reasons = read_folder(folder)
    assert read == ["note.txt"]
    assert reasons.keys() == {"scanned.pdf", "fake.pdf", "empty.pdf"}
    assert reasons["scanned.pdf"] == (
        "no text layer (scanned pages): a model that reads images (CLIP, ColPali) reads its pages"
    )
    assert reasons["fake.pdf"].startswith("not a readable PDF")
    assert reasons["empty.pdf"] == "an empty file, not a PDF"
