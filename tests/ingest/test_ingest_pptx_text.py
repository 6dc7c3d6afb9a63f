"""PowerPoint decks (.pptx) as a text model reads them: each slide's shapes and speaker notes, in the
deck's order, one document whose chunks name their slide; a file that is no readable deck is one
line and the rest of the folder is read."""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path

import pytest
from ingest_support import read_folder

from poolrag.errors import InvalidInputError
from poolrag.ingest import TokenChunker, ooxml_package
from poolrag.ingest.pptx_text import read_pptx_text

pptx = pytest.importorskip("pptx", reason="the decks are written by python-pptx (test extra)")
from pptx.util import Inches  # noqa: E402


def _deck(path: Path) -> Path:
    """A review deck: title and bullets with notes, a grouped text box, a table, an empty slide, and
    a 'Questions?' slide moved to second place in the deck's list."""
    deck = pptx.Presentation()
    deck.core_properties.title = "Q3 review"
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Revenue grew"
    bullets = first.placeholders[1].text_frame
    bullets.text = "Up 12% on Q2"
    bullets.add_paragraph().text = "Driven by the\vnew store"  # a line break inside a paragraph
    first.notes_slide.notes_text_frame.text = "Mention the weather in July."
    number = next(p for p in deck.slide_layouts[1].placeholders if p.placeholder_format.type == 13)
    first.shapes._spTree.append(copy.deepcopy(number._element))  # the slide number: furniture
    regions = deck.slides.add_slide(deck.slide_layouts[5])
    regions.shapes.title.text = "By region"
    table = regions.shapes.add_table(3, 3, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([["Region", "Q2", "Q3"], ["North", "", "14"], ["South", "9", "11"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    group = regions.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(5), Inches(3), Inches(1)).text_frame.text = "Source: ledger"
    deck.slides.add_slide(deck.slide_layouts[6])  # empty
    last = deck.slides.add_slide(deck.slide_layouts[6])
    last.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Questions?"
    slides = deck.slides._sldIdLst
    slides.insert(1, slides[3])
    deck.save(path)
    return path


def test_a_deck_reads_slide_by_slide_in_its_order_with_notes_and_tables(tmp_path: Path) -> None:
    document = read_pptx_text(_deck(tmp_path / "review.pptx"))
    assert document.text == (
        "Revenue grew\n\nUp 12% on Q2\nDriven by the\nnew store\n\nMention the weather in July."
        "\n\nQuestions?"
        "\n\nBy region\n\nRegion | Q2 | Q3\nNorth | | 14\nSouth | 9 | 11\n\nSource: ledger"
    )
    assert document.metadata == {"filename": "review.pptx", "title": "Q3 review"}
    starts = document.page_starts
    assert document.text[starts[1] :].startswith("Questions?")
    assert document.text[starts[2] :].startswith("By region")
    assert starts[3] > len(document.text)  # the empty slide holds no text


def test_each_chunk_names_the_slide_it_starts_on(tmp_path: Path, minilm_engine) -> None:
    """As a PDF's chunks name their page: a chunk running on into the next slide names the first."""
    document = read_pptx_text(_deck(tmp_path / "review.pptx"))
    chunks = TokenChunker(minilm_engine.tokenizer, max_tokens=8, overlap=0).split(document)
    pages = {chunk.text.split("\n")[0]: chunk.metadata["page"] for chunk in chunks}
    assert pages["Revenue grew"] == 1 and pages["Mention the weather in July."] == 1
    assert pages["By region"] == 3 and pages["South | 9 | 11"] == 3
    assert all(chunk.metadata["title"] == "Q3 review" for chunk in chunks)


def test_files_that_are_no_readable_deck_are_one_line_each(tmp_path: Path) -> None:
    folder = tmp_path / "decks"
    folder.mkdir()
    _deck(folder / "good.pptx")
    (folder / "old.pptx").write_bytes(b"\xd0\xcf\x11\xe0" + bytes(60))  # a 97-2003 .ppt renamed
    with zipfile.ZipFile(folder / "letter.pptx", "w") as package:  # a Word document renamed
        package.writestr("word/document.xml", "<document/>")
    pptx.Presentation().save(folder / "blank.pptx")
    read, skipped = read_folder(folder)
    assert read == ["good.pptx"]
    assert skipped == {
        "blank.pptx": "no text in this presentation",
        "letter.pptx": "not a PowerPoint presentation (no ppt/presentation.xml inside)",
        "old.pptx": "not a readable .pptx (File is not a zip file): a damaged file, a PowerPoint 97-2003 "
        ".ppt renamed, or one that needs a password to open",
    }


def test_a_deck_over_the_xml_budget_is_refused_not_read(tmp_path: Path, monkeypatch) -> None:
    path = _deck(tmp_path / "review.pptx")
    monkeypatch.setattr(ooxml_package, "MAX_XML_BYTES", 4096)
    with pytest.raises(InvalidInputError, match="unpacks to more than 0 MiB of XML"):
        read_pptx_text(path)


def test_a_slide_of_a_million_empty_elements_is_refused_before_its_tree_is_built(tmp_path: Path) -> None:
    """A few KB of deflated ``<x/>`` passed the byte budget and parsed into gigabytes of tree."""
    path = _deck(tmp_path / "review.pptx")
    bomb = tmp_path / "bomb.pptx"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "ppt/slides/slide1.xml":
                root_end = data.index(b">", data.index(b"<p:sld")) + 1
                data = data[:root_end] + b"<x/>" * (ooxml_package.MAX_PART_ELEMENTS + 1) + data[root_end:]
            target.writestr(info, data)
    assert bomb.stat().st_size < 200_000
    with pytest.raises(InvalidInputError, match=r"slide1\.xml holds more than 1,000,000 XML elements"):
        read_pptx_text(bomb)
