"""A Word document given to a text model: its paragraphs, list items and table rows in order, as
Word shows them (tracked deletions and headers left out, a text box read once), its title in the
payload; a file that is not a readable .docx, or holds no text, is one line and the rest is read."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from ingest_support import read_folder

from poolrag.errors import InvalidInputError
from poolrag.ingest import Document, ooxml_package, read_paths
from poolrag.ingest.docx_text import docx_text, read_docx_text

docx = pytest.importorskip("docx", reason="the Word documents are written by python-docx (test extra)")
from docx.oxml import parse_xml  # noqa: E402

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


def _report(path: Path) -> Path:
    """A short report as people write one: a title, a heading, styled runs, two lists, a table with
    a table in one of its cells, a line break, and a header and footer on every page."""
    document = docx.Document()
    document.core_properties.title = "Hive  report"
    document.add_heading("Bees in winter", level=1)
    paragraph = document.add_paragraph("Honey bees form a ")
    paragraph.add_run("cluster").bold = True
    paragraph.add_run(" to keep warm.\tThe queen stays inside.")
    document.add_paragraph("Check the stores", style="List Bullet")
    document.add_paragraph("Block the wind", style="List Number")
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("Month", "Cluster"), ("January", "tight")], strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    inner = table.cell(1, 1).add_table(rows=1, cols=2)
    inner.cell(0, 0).text, inner.cell(0, 1).text = "core", "34 °C"
    document.add_paragraph("")  # an empty paragraph reads as nothing
    broken = document.add_paragraph("Line one")
    broken.add_run().add_break()
    broken.add_run("line two")
    section = document.sections[0]
    section.header.paragraphs[0].text = "CONFIDENTIAL"
    section.footer.paragraphs[0].text = "Page footer"
    document.save(path)
    return path


def test_a_report_reads_as_its_paragraphs_lists_and_rows_in_order(tmp_path: Path) -> None:
    text, title = docx_text(_report(tmp_path / "report.docx"))
    assert title == "Hive report"
    assert text == (
        "Bees in winter\n"
        "\n"
        "Honey bees form a cluster to keep warm.\tThe queen stays inside.\n"
        "\n"
        "- Check the stores\n"
        "- Block the wind\n"
        "\n"
        "Month | Cluster\n"
        "January | tight core | 34 °C\n"
        "\n"
        "Line one\n"
        "line two"
    )


def _paragraph_xml(body: str) -> str:
    return f'<w:p xmlns:w="{W}" xmlns:mc="{MC}">{body}</w:p>'


def test_tracked_deletions_are_left_out_and_a_text_box_is_read_once(tmp_path: Path) -> None:
    """Word keeps deleted text (``w:delText``) until changes are accepted, and writes a text box
    twice: for readers that know text boxes, and a fallback copy for those that do not."""
    document = docx.Document()
    body = document.element.body
    edited = (
        '<w:r><w:t xml:space="preserve">The hive holds </w:t></w:r>'
        "<w:del w:id='1' w:author='a'><w:r><w:delText>ten</w:delText></w:r></w:del>"
        "<w:ins w:id='2' w:author='a'><w:r><w:t>twenty</w:t></w:r></w:ins>"
        '<w:r><w:t xml:space="preserve"> frames.</w:t></w:r>'
    )
    box = "<w:txbxContent><w:p><w:r><w:t>Drone count</w:t></w:r></w:p></w:txbxContent>"
    boxed = (
        "<w:r><mc:AlternateContent>"
        f"<mc:Choice><w:drawing>{box}</w:drawing></mc:Choice>"
        f"<mc:Fallback><w:pict>{box}</w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r><w:r><w:t>See the box.</w:t></w:r>"
    )
    for xml in (edited, boxed):
        body.insert(len(body) - 1, parse_xml(_paragraph_xml(xml)))  # before the section properties
    document.save(tmp_path / "edited.docx")
    text, _ = docx_text(tmp_path / "edited.docx")
    assert text == "The hive holds twenty frames.\n\nDrone count\n\nSee the box."


def test_text_a_tracked_change_moved_is_read_once_where_it_went(tmp_path: Path) -> None:
    """A tracked move keeps the text at its old place (``w:moveFrom``, struck through) and at its
    new one (``w:moveTo``) until changes are accepted: it is read once, where it went."""
    document = docx.Document()
    body = document.element.body
    moved = "<w:r><w:t>Feed in autumn.</w:t></w:r>"
    for xml in (
        f"<w:r><w:t>Winter. </w:t></w:r><w:moveFrom w:id='1' w:author='a'>{moved}</w:moveFrom>",
        f"<w:moveTo w:id='2' w:author='a'>{moved}</w:moveTo><w:r><w:t> Then wait.</w:t></w:r>",
    ):
        body.insert(len(body) - 1, parse_xml(_paragraph_xml(xml)))
    document.save(tmp_path / "moved.docx")
    assert docx_text(tmp_path / "moved.docx")[0] == "Winter.\n\nFeed in autumn. Then wait."


def test_what_word_does_not_show_is_not_read_and_what_it_shows_is(tmp_path: Path) -> None:
    """Hidden text, an unfilled control's prompt, a ruby's reading and numbering turned off
    (``numId`` 0) are not shown; an equation's text and a positional tab are. A row's empty
    middle cell keeps its column, and a line break in a cell keeps the row on one line."""
    document = docx.Document()
    body = document.element.body
    paragraphs = (
        "<w:r><w:t>shown</w:t></w:r><w:r><w:rPr><w:vanish/></w:rPr><w:t>HIDDEN</w:t></w:r>",
        "<w:sdt><w:sdtPr><w:showingPlcHdr/></w:sdtPr><w:sdtContent><w:r><w:t>Click or tap here to "
        "enter text.</w:t></w:r></w:sdtContent></w:sdt><w:r><w:t>Filled in.</w:t></w:r>",
        '<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="0"/></w:numPr></w:pPr>'
        "<w:r><w:t>Not a list</w:t></w:r>",
        '<w:r><w:t xml:space="preserve">Let </w:t></w:r><m:oMath xmlns:m="http://schemas.openxmlformats.org/'
        'officeDocument/2006/math"><m:r><m:t>x=2</m:t></m:r></m:oMath><w:r><w:t>.</w:t><w:ptab/><w:t>end</w:t></w:r>',
        "<w:r><w:ruby><w:rt><w:r><w:t>kan</w:t></w:r></w:rt><w:rubyBase><w:r><w:t>漢</w:t></w:r></w:rubyBase></w:ruby></w:r>",
    )
    for xml in paragraphs:
        body.insert(len(body) - 1, parse_xml(_paragraph_xml(xml)))
    table = document.add_table(rows=2, cols=3)
    for cell, text in zip(table.rows[0].cells, ("Name", "Phone", "Email"), strict=True):
        cell.text = text
    table.cell(1, 0).text, table.cell(1, 2).text = "Bob", "bob@example.org"
    table.cell(0, 1).paragraphs[0].add_run().add_break()
    table.cell(0, 1).paragraphs[0].add_run("(work)")
    document.save(tmp_path / "shown.docx")
    text, _ = docx_text(tmp_path / "shown.docx")
    assert text == (
        "shown\n\nFilled in.\n\nNot a list\n\nLet x=2.\tend\n\n漢\n\n"
        "Name | Phone (work) | Email\nBob | | bob@example.org"
    )


def test_a_document_saved_by_word_online_is_read_from_the_part_its_package_names(tmp_path: Path) -> None:
    """Word Online names the body word/document2.xml; the package's relationships say so."""
    document = docx.Document()
    document.add_paragraph("Saved in the browser.")
    document.save(tmp_path / "local.docx")
    with (
        zipfile.ZipFile(tmp_path / "local.docx") as source,
        zipfile.ZipFile(tmp_path / "online.docx", "w") as online,
    ):
        for item in source.infolist():
            data = source.read(item).replace(b"word/document.xml", b"word/document2.xml")
            data = data.replace(b'Target="document.xml"', b'Target="document2.xml"')
            online.writestr(item.filename.replace("word/document.xml", "word/document2.xml"), data)
    assert "word/document.xml" not in zipfile.ZipFile(tmp_path / "online.docx").namelist()
    assert docx_text(tmp_path / "online.docx")[0] == "Saved in the browser."


def test_a_strict_open_xml_document_is_read(tmp_path: Path) -> None:
    """Word's "Strict Open XML Document" writes the ISO namespaces instead of the transitional ones."""
    document = docx.Document()
    document.add_paragraph("Strictly written.")
    document.save(tmp_path / "transitional.docx")
    strict = b"http://purl.oclc.org/ooxml/wordprocessingml/main"
    with (
        zipfile.ZipFile(tmp_path / "transitional.docx") as source,
        zipfile.ZipFile(tmp_path / "strict.docx", "w") as out,
    ):
        for item in source.infolist():
            out.writestr(item, source.read(item).replace(W.encode(), strict))
    assert strict in zipfile.ZipFile(tmp_path / "strict.docx").read("word/document.xml")
    assert docx_text(tmp_path / "strict.docx")[0] == "Strictly written."


def test_a_package_whose_compressed_body_is_damaged_is_one_line(tmp_path: Path) -> None:
    document = docx.Document()
    for _ in range(20):
        document.add_paragraph("Bees " * 40)
    document.save(tmp_path / "good.docx")
    with zipfile.ZipFile(tmp_path / "good.docx") as package:
        body = package.getinfo("word/document.xml")
    data = bytearray((tmp_path / "good.docx").read_bytes())
    start = body.header_offset + 30 + len(body.filename) + len(body.extra) + 40  # inside its deflate data
    data[start : start + 64] = bytes(64)
    (tmp_path / "damaged.docx").write_bytes(bytes(data))
    with pytest.raises(InvalidInputError, match="a damaged Word document"):
        docx_text(tmp_path / "damaged.docx")


def test_the_title_goes_into_each_chunks_payload_and_the_text_is_the_digest(tmp_path: Path) -> None:
    report = _report(tmp_path / "report.docx")
    (doc,) = read_paths([tmp_path])
    assert isinstance(doc, Document)
    assert doc.source == report.resolve().as_posix()
    assert doc.metadata == {"filename": "report.docx", "title": "Hive report"}
    resaved = docx.Document(report)  # saved again with another author: new bytes, the same words
    resaved.core_properties.author = "Someone else"
    resaved.save(tmp_path / "resaved.docx")
    assert (tmp_path / "resaved.docx").read_bytes() != report.read_bytes()
    assert read_docx_text(tmp_path / "resaved.docx").digest == doc.digest


def test_a_body_that_unpacks_past_the_bound_is_refused_not_read(tmp_path: Path, monkeypatch) -> None:
    """A zip bomb costs no memory: the body's XML is read through a byte budget (512 MiB; here the
    bound is lowered so a real document passes it)."""
    document = docx.Document()
    for _ in range(50):
        document.add_paragraph("Bees " * 40)
    document.save(tmp_path / "long.docx")
    monkeypatch.setattr(ooxml_package, "MAX_XML_BYTES", 4096)
    with pytest.raises(InvalidInputError, match="its text unpacks to more than 0 MiB of XML"):
        docx_text(tmp_path / "long.docx")


def test_a_file_a_text_model_cannot_use_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "note.md").write_text("A short note about honey and wax.")
    docx.Document().save(folder / "blank.docx")
    (folder / "old.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))  # a .doc, renamed
    with zipfile.ZipFile(folder / "sheet.docx", "w") as package:
        package.writestr("xl/workbook.xml", "<workbook/>")
    with zipfile.ZipFile(folder / "cut.docx", "w") as package:
        package.writestr("word/document.xml", f'<w:document xmlns:w="{W}"><w:body><w:p>')
    read, reasons = read_folder(folder)
    assert read == ["note.md"]
    assert reasons.pop("cut.docx").startswith("a damaged Word document (its XML: no element found")
    assert reasons == {
        "blank.docx": "no text in this Word document",
        "old.docx": (
            "not a readable .docx (File is not a zip file): a damaged file, a Word 97-2003 .doc "
            "renamed, or one that needs a password to open"
        ),
        "sheet.docx": "not a Word document (no word/document.xml inside)",
    }
