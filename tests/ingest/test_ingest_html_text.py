"""A web page given to a text model: the text a reader sees (no markup, scripts or menus; only the
page's main part when it marks one), lines where blocks end, its title in the payload; a page that
cannot be decoded, or shows no text, is one line and the rest of the folder is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_support import read_folder

from poolrag.errors import InvalidInputError
from poolrag.ingest import Document, read_paths
from poolrag.ingest.html_text import decode_html, html_text, read_html_text

#: a built documentation page as Sphinx and docs sites write one: head, menu, main part, footer
DOCS_PAGE = """<!DOCTYPE html>
<html lang="en"><head>
  <meta charset="utf-8"><title>Installing  the tool &mdash; Manual</title>
  <style>body { color: black }</style>
  <script>window.analytics = "track";</script>
</head>
<body>
  <header class="site"><a href="/">Home</a></header>
  <nav class="sidebar"><ul><li><a href="intro.html">Introduction</a></li></ul></nav>
  <div class="document" role="main">
    <h1>Installing the tool<a class="headerlink" href="#install">&para;</a></h1>
    <p>The tool needs <code>Python&nbsp;3.11</code>
       and a C compiler.</p>
    <pre>
def main():
    return 0
</pre>
    <ul>
      <li>Linux</li>
      <li> macOS </li>
    </ul>
    <table><tr><th>Version</th><th>Released</th></tr><tr><td>1.0</td><td>2026</td></tr></table>
    <p hidden>Old instructions.</p>
    <form><button>Search</button></form>
  </div>
  <footer>&copy; 2026 The Authors</footer>
</body></html>
"""


def test_a_docs_page_reads_as_its_main_part_in_lines_and_paragraphs() -> None:
    text, title = html_text(DOCS_PAGE)
    assert title == "Installing the tool — Manual"
    assert text == (
        "Installing the tool\n"
        "\n"
        "The tool needs Python\xa03.11 and a C compiler.\n"
        "\n"
        "def main():\n"
        "    return 0\n"
        "\n"
        "- Linux\n"
        "- macOS\n"
        "\n"
        "Version | Released\n"
        "1.0 | 2026"
    )


def test_a_page_without_a_main_part_keeps_its_body_but_not_its_menus_or_scripts() -> None:
    text, title = html_text(
        "<html><body><nav>Home | Blog</nav><h2>Sourdough</h2><p>Feed the starter.<br>Wait a day.</p>"
        "<script>var x = 1;</script><noscript>Enable JavaScript</noscript><footer>Contact</footer>"
        "<p>Bake at 250 &deg;C.</p></body></html>"
    )
    assert (text, title) == ("Sourdough\n\nFeed the starter.\nWait a day.\n\nBake at 250 °C.", "")
    unclosed = "<html><head><title>Notes</title><style>p {}</style><p>No body tag, no end of head."
    assert html_text(unclosed) == ("No body tag, no end of head.", "Notes")


def test_menus_marked_by_role_or_by_a_doc_generators_class_are_dropped() -> None:
    """Sphinx marks its menus role="navigation", DocBook and Texinfo by class; a table's empty cells
    keep their columns between cells with text, not before or after them, and a list item's
    paragraph stays on its bullet's line."""
    text, _ = html_text(
        '<div class="related" role="navigation"><a href="index.html">index</a></div>'
        '<table class="nav" summary="Navigation header"><tr><td><a href="a.html">Prev</a></td></tr></table>'
        '<div class="nav-panel"><p>Next: Types</p></div><div role="search"><input name="q"></div>'
        "<table><tr><td></td><td>Release notes</td><td>&nbsp;</td><td></td><td>4.2</td></tr></table>"
        "<ul><li><p>Warning: large range</p><p>Seen with big arrays.</p></li></ul>"
        "<pre>a\n&nbsp; \nb</pre>"
    )
    assert text == "Release notes | | | 4.2\n\n- Warning: large range\n\nSeen with big arrays.\n\na\n\nb"


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ('<body><form id="aspnetForm"><h1>Title</h1><p>Content.</p></form></body>', "Title\n\nContent."),
        ("<table><tr><td><p>a</p></td><td><ul><li>x</li><li>y<br>z</li></ul></td></tr></table>", "a | x y z"),
        ("Returns the value.<p/>Never null.<hr/>Since 2.0", "Returns the value.\n\nNever null.\nSince 2.0"),
        ("<ul><li hidden>old<li>a<li>b</ul><p>After</p>", "- a\n- b\n\nAfter"),
        ('<ul><li class="nav">Home<li>Real</ul><p>After</p>', "- Real\n\nAfter"),
        ("<ul><li></li><li>b</li><li><ul><li>c</li></ul></li></ul>", "- b\n- c"),
        ("<html><head><title>T</title>Hello <b>world</b>", "Hello world"),
        ("<pre>    indented\nnext</pre>", "    indented\nnext"),
        ('<h2>Install<a class="hash-link" href="#install">\u200b</a></h2>', "Install"),
        (
            '<video>No video support.</video><div style="display: none">x</div><dialog>Cookies?</dialog>ok',
            "ok",
        ),
        ('<div class="header"><p>Next: Types, Up: Using libffi</p></div><p>Body</p>', "Body"),
        ("a < b and c <d", "a < b and c <d"),
        ("<div hidden>a<div>b</div>c</div>d", "d"),
        ("<p>a<br hidden>b</p>", "ab"),
        ('<div role="main"><div>a</div>b</div><p>c</p>', "a\nb"),
        ("<table><tr><td>a</td><td></td></tr></table><pre>b</pre>", "a\n\nb"),
        (
            '<main><h1 id="derive"><a class="header" href="#derive">Derivable Traits</a></h1>'
            "<p>Text.</p></main>",
            "Derivable Traits\n\nText.",
        ),
        (
            '<h2 class="accordion-header"><button type="button">How do I get a refund?</button></h2>'
            '<div class="accordion-collapse collapse">Write within 30 days.</div><button>Close</button>'
            "<h3>Steps<button hidden>Expand</button></h3>",
            "How do I get a refund?\n\nWrite within 30 days.\n\nSteps",
        ),
    ],
    ids=[
        "a page inside one form",
        "blocks in cells",
        "self-closed blocks",
        "a hidden item left open",
        "a menu item left open",
        "empty and nested items",
        "an unclosed head",
        "a leading listing",
        "a zero-width permalink",
        "fallbacks and hidden boxes",
        "Texinfo 6 navigation",
        "a last '<'",
        "a hidden division inside a hidden one",
        "a hidden line break",
        "a division inside a main division",
        "a row ending in an empty cell",
        "mdBook's headings",
        "an accordion's question",
    ],
)
def test_what_real_pages_do_reads_as_a_reader_sees_it(markup: str, text: str) -> None:
    assert html_text(markup)[0] == text


def test_an_icon_sprites_titles_are_not_the_pages_title() -> None:
    page = '<head><title>Quickstart</title></head><svg style="display:none"><title>Menu</title></svg><p>x'
    assert html_text(page) == ("x", "Quickstart")


def test_markup_pythons_parser_cannot_read_is_one_line() -> None:
    with pytest.raises(InvalidInputError, match=r"not readable HTML \(expected name token"):
        html_text("<p>Word's own HTML <![ if !mso]> x")


def test_the_title_goes_into_each_chunks_payload_and_the_text_is_the_digest(tmp_path: Path) -> None:
    page = tmp_path / "install.html"
    page.write_text(DOCS_PAGE, encoding="utf-8")
    (doc,) = read_paths([tmp_path])
    assert isinstance(doc, Document)
    assert doc.source == page.resolve().as_posix()
    assert doc.metadata == {"filename": "install.html", "title": "Installing the tool — Manual"}
    restyled = tmp_path / "restyled.htm"  # a new theme, the same words: nothing to embed again
    restyled.write_text(DOCS_PAGE.replace("color: black", "color: navy").replace("sidebar", "menu"))
    assert read_html_text(restyled).digest == doc.digest


def test_a_page_in_a_declared_legacy_charset_is_read_in_it() -> None:
    latin = '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"><p>Caf\xe9 \x93menu\x94'
    assert html_text(decode_html(latin.encode("latin-1")))[0] == "Café “menu”"  # as browsers: windows-1252
    assert decode_html("<p>été</p>".encode("utf-8-sig")) == "<p>été</p>"


@pytest.mark.parametrize(
    ("label", "text", "codec"),
    [
        ("Shift_JIS", "①番 ㈱会社 髙橋", "cp932"),  # Windows' Shift_JIS, as Japanese pages are saved
        ("x-sjis", "日本語", "cp932"),
        ("TIS-620", "ภาษาไทย", "cp874"),
        ("koi8", "Привет", "koi8_r"),
        ("x-gbk", "中文", "gbk"),
        ("ISO-8859-9", "“Günaydın” 5 €", "cp1254"),  # Turkish Latin-5 read as windows-1254, as Latin-1
    ],
)
def test_a_charset_is_known_by_the_labels_browsers_read(label: str, text: str, codec: str) -> None:
    page = f'<html><head><meta charset="{label}"></head><body><p>{text}</p></body></html>'
    assert html_text(decode_html(page.encode(codec)))[0] == text


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<p>caf\xe9</p>", "not UTF-8 HTML (invalid continuation byte) and it declares no charset"),
        (b'<meta charset="x-mac-klingon"><p>caf\xe9</p>', "it declares 'x-mac-klingon': save it as UTF-8"),
        (b'<meta charset="shift_jis"><p>\x81</p>', "cannot be read in the charset it declares (shift_jis)"),
    ],
    ids=["undeclared", "unknown charset", "not that charset"],
)
def test_a_page_that_cannot_be_decoded_says_why(data: bytes, reason: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        decode_html(data)
    assert reason in str(caught.value)


def test_a_page_a_text_model_cannot_use_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "note.md").write_text("A short note about honey and wax.")
    (folder / "app.html").write_text("<html><body><div id=root></div><script>render()</script></body></html>")
    (folder / "old.htm").write_bytes(b"<p>Stra\xdfe</p>")
    read, reasons = read_folder(folder)
    assert read == ["note.md"]
    assert reasons == {
        "app.html": "no visible text in this HTML page (scripts, menus and markup only)",
        "old.htm": "not UTF-8 HTML (invalid continuation byte) and it declares no charset: save it as UTF-8",
    }
