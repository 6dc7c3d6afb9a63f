"""A web page as a text model reads it: the text a reader sees, not its markup.

Saved pages and built documentation (Sphinx, MkDocs, Texinfo, a docs site's HTML) are a common
corpus; embedding their tags, scripts and menus would bury the words. Python's own ``html.parser``
reads them (no extra to install): scripts, styles, buttons (but one in a heading, an accordion's
question), hidden elements and menus are dropped, a page
that marks its ``<main>`` part (the element or ``role="main"``) keeps only that part, and block
elements (paragraphs, headings, list items, table rows) end lines, so the chunker cuts between
them; a row's cells are joined by `` | ``. The ``<title>`` goes into each chunk's payload as ``title``.

A file is read as UTF-8, or in the charset its ``<meta>`` declares when that is one of the
common ones below (the name only picks a table from this list, never what to import).
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from pathlib import Path

from poolrag.errors import InvalidInputError
from poolrag.ingest.readers import CELL_SEPARATOR, Document, marked_encoding, parsed_document

# fmt: off
#: elements whose content no reader sees as the page's text (void elements cannot be here: they
#: have no end tag to leave them by)
_DROPPED = frozenset((
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas",
    "video", "audio", "nav", "footer", "button", "select", "textarea"
))
#: headings, where a button is the heading's text (WAI-ARIA's and Bootstrap's accordions)
_HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
#: elements without an end tag
_VOID = frozenset((
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"
))
#: elements that start and end a line of their own
_BLOCKS = frozenset((
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "dialog", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup",
    "hr", "li", "main", "ol", "p", "pre", "section", "summary", "table", "tr", "ul"
))
# fmt: on
#: declared charsets read as the codec beside them, under the labels browsers know them by (WHATWG's
#: Encoding standard); browsers read Latin-1 and ASCII as windows-1252, Latin-5 (ISO-8859-9) as
#: windows-1254, TIS-620 as windows-874, and Shift_JIS as windows-31j, whose circled numbers and
#: NEC/IBM kanji Japanese pages use (①, 髙)
_CHARSETS = {
    **dict.fromkeys(("utf-8", "utf8", "unicode-1-1-utf-8"), "utf-8"),
    **dict.fromkeys(
        ("iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii", "windows-1252", "cp1252"),
        "cp1252",
    ),
    **{f"{prefix}{n}": f"cp{n}" for n in range(1250, 1259) for prefix in ("windows-", "cp", "x-cp")},
    **dict.fromkeys(("windows-874", "tis-620", "iso-8859-11", "dos-874"), "cp874"),
    **{f"iso-8859-{n}": f"iso8859_{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    **{f"iso8859-{n}": f"iso8859_{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    **dict.fromkeys(("iso-8859-9", "iso8859-9", "latin5", "l5"), "cp1254"),
    **dict.fromkeys(("koi8-r", "koi8_r", "koi8", "koi"), "koi8_r"),
    **dict.fromkeys(("koi8-u", "koi8-ru"), "koi8_u"),
    **dict.fromkeys(("ibm866", "cp866", "866"), "cp866"),
    **dict.fromkeys(("macintosh", "mac", "x-mac-roman"), "mac_roman"),
    **dict.fromkeys(("x-mac-cyrillic", "x-mac-ukrainian"), "mac_cyrillic"),
    **dict.fromkeys(
        ("shift_jis", "shift-jis", "sjis", "x-sjis", "windows-31j", "ms932", "ms_kanji", "csshiftjis"),
        "cp932",
    ),
    **dict.fromkeys(("euc-jp", "x-euc-jp"), "euc_jp"),
    "iso-2022-jp": "iso2022_jp",
    **dict.fromkeys(
        ("gb2312", "gbk", "x-gbk", "cp936", "gb_2312", "gb_2312-80", "chinese", "gb18030"), "gb18030"
    ),
    **dict.fromkeys(("big5", "big5-hkscs", "cn-big5", "x-x-big5", "csbig5"), "big5hkscs"),
    **dict.fromkeys(
        ("euc-kr", "ks_c_5601-1987", "ks_c_5601-1989", "ksc5601", "ksc_5601", "korean", "windows-949"),
        "cp949",
    ),
}
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_BLANK_LINE = re.compile(r"^[^\S\n]+$", re.MULTILINE)  # spaces alone on a line (in <pre>) say nothing
#: what a page's head holds; any other element starts its body, closed head or not
_HEAD_TAGS = frozenset(("base", "link", "meta", "noscript", "script", "style", "template", "title"))
#: elements whose end tag may be left out: the next one of the same name ends one
_ENDS_ITSELF = frozenset(("p", "li", "dt", "dd", "tr", "td", "th", "option"))
#: the elements that end such an element left open inside them
_HOLDS_LISTS = frozenset(
    ("ul", "ol", "dl", "table", "tbody", "thead", "tfoot", "tr", "select", "div", "body")
)
_NOT_DISPLAYED = re.compile(r"display\s*:\s*none", re.IGNORECASE)
_MENU_ROLES = frozenset(("navigation", "search", "contentinfo"))
#: DocBook's navigation header and footer, Texinfo's (6: "header", 7: "nav-panel"), Bootstrap's
#: menus, breadcrumbs
_MENU_CLASSES = frozenset(
    ("nav", "navbar", "navheader", "navfooter", "nav-panel", "header", "breadcrumb", "breadcrumbs")
)
#: what a heading's link to itself shows (Sphinx's pilcrow, a '#', a section sign): not its text
_PERMALINK_MARKS = frozenset(("¶", "#", "§", "🔗", "\u200b"))  # Docusaurus's: a zero-width space
_LINE_BREAK = "\n"
_PARAGRAPH_BREAK = "\n\n"


class _VisibleText(HTMLParser):
    """Collects a page's visible text as (inside ``main``, kind, piece) triples, and its title: a
    piece of text, of preformatted text, a list item's bullet, or a line break of one or two line
    ends (a blank line)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[tuple[bool, str, str]] = []
        self.title: list[str] = []
        self.has_main = False
        self._dropping: list[str] = []  # the dropped element we are in, once per nesting level
        self._main: list[str] = []  # the same for the page's main part
        self._pre = 0
        self._pre_opened = False  # a line end right after <pre> is not part of its text
        self._in_title = False
        self._titled = False  # the page's title was read (an icon's <title> in an <svg> is not it)
        self._in_self_link = False
        self._headings = 0  # headings open: a button in one is its text (an accordion's question)
        self._in_cell = False  # a table cell's blocks and line breaks are spaces: its row is one line
        self._row_has_text = False  # the table row read has shown text: a next cell is set apart
        self._cells_waiting = 0  # cells begun since its last text: separators before the next text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._pre_opened = False
        if tag == "title" and not self._titled and self._dropping in ([], ["head"]):
            self._in_title = True
            return
        if self._inside_dropped(tag):
            return
        named = dict(attrs)
        if _is_dropped(tag, named, in_heading=self._headings > 0):
            if tag not in _VOID:
                self._dropping.append(tag)
            return
        if self._main:
            if tag == self._main[0]:
                self._main.append(tag)
        elif tag == "main" or named.get("role") == "main":
            self._main.append(tag)
            self.has_main = True
        self._headings += tag in _HEADINGS
        if tag == "a":
            self._in_self_link = (named.get("href") or "").startswith("#")
        elif tag == "pre":
            self._pre += 1
            self._pre_opened = True
        self._start_block(tag)

    def _inside_dropped(self, tag: str) -> bool:
        """Whether ``tag`` opens inside a dropped element, which counts its own tag so that its end
        tag is known; an unclosed head, or a dropped item left open, ends where the next begins."""
        if self._dropping == ["head"] and tag not in _HEAD_TAGS:
            self._dropping = []  # a page whose head was never closed: its body has begun
        if not self._dropping:
            return False
        if self._dropping[0] == "head" and tag in _HEAD_TAGS and tag not in _VOID:
            self._dropping.append(tag)  # a head's script or style: its text is no body's
        if tag != self._dropping[0]:
            return True
        if tag not in _ENDS_ITSELF or len(self._dropping) > 1:
            self._dropping.append(tag)
            return True
        self._dropping = []  # <li hidden>x<li>y: the next item ends the dropped one
        return False

    def _start_block(self, tag: str) -> None:
        """A table's or row's start begins a line of cells; a cell's is a separator to come, once
        text follows; a list item's, a bullet on a line of its own; another block's, a break."""
        if tag in ("tr", "table"):
            self._in_cell = self._row_has_text = False
            self._cells_waiting = 0
        if tag in ("td", "th"):
            self._in_cell = True
            self._cells_waiting += self._row_has_text  # between cells with text, empty ones count
        elif tag == "li" and not self._in_cell:
            self._add(_LINE_BREAK, "break")
            self._add("- ", "bullet")
        else:
            self._block(tag)

    def handle_endtag(self, tag: str) -> None:
        self._pre_opened = False
        if tag == "title":
            if self._in_title:
                self._in_title, self._titled = False, True
            return
        if self._dropping:
            if tag == self._dropping[0] or (self._dropping[0] == "head" and tag == self._dropping[-1]):
                self._dropping.pop()
                return
            if len(self._dropping) > 1 or self._dropping[0] not in _ENDS_ITSELF or tag not in _HOLDS_LISTS:
                return
            self._dropping = []  # </ul> after <li hidden>x: the list's end ends the dropped item
        if tag in _HEADINGS and self._headings:
            self._headings -= 1
        if tag == "a":
            self._in_self_link = False
        elif tag == "pre" and self._pre:
            self._pre -= 1
        elif tag in ("td", "th", "tr", "table"):
            self._in_cell = False
            if tag in ("tr", "table"):
                self._cells_waiting = 0  # a row's trailing empty cells separate nothing after it
        self._block(tag)
        if self._main and tag == self._main[0]:
            self._main.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._dropping:
            self._block(tag)  # <br/>, and an author's <p/> or <hr/>

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
            return
        if self._dropping == ["head"] and data.strip():
            self._dropping = []  # text after an unclosed head's title: the body has begun
        if self._dropping or (self._in_self_link and data.strip() in _PERMALINK_MARKS):
            return
        if self._pre:
            self._add(data[1:] if self._pre_opened and data.startswith("\n") else data, "pre")
        else:
            self._add(_SPACES.sub(" ", data) if data.strip() else " ")  # a lone &nbsp; is a space
        self._pre_opened = False

    def _block(self, tag: str) -> None:
        """The line break a block element (or ``<br>``) makes at its start and end; a space inside a
        table cell, whose row reads as one line."""
        if tag == "br" or tag in _BLOCKS or (tag == "code" and self._pre):  # a listing per <code>
            if self._in_cell:
                self._add(" ")
            else:
                self._add(_LINE_BREAK if tag in ("br", "code") else _block_break(tag), "break")

    def _add(self, piece: str, kind: str = "text") -> None:
        if kind in ("text", "pre") and piece.strip():
            for _ in range(self._cells_waiting):
                self.pieces.append((bool(self._main), "text", CELL_SEPARATOR))
            self._cells_waiting = 0
            self._row_has_text = True
        self.pieces.append((bool(self._main), kind, piece))


def _is_dropped(tag: str, attributes: dict[str, str | None], *, in_heading: bool = False) -> bool:
    """An element no reader sees: by its kind (but a button in a heading, which is the heading's
    text), hidden (the attribute, ``display: none``, a closed ``<dialog>``), or a menu."""
    if tag in _DROPPED and not (tag == "button" and in_heading):
        return True
    if "hidden" in attributes or (tag == "dialog" and "open" not in attributes):
        return True
    return bool(_NOT_DISPLAYED.search(attributes.get("style") or "")) or _is_navigation(tag, attributes)


def _is_navigation(tag: str, attributes: dict[str, str | None]) -> bool:
    """A menu marked by its role (ARIA's navigation, search and page footer, as ``<nav>``,
    ``<form>`` and ``<footer>``) or by the class documentation generators give theirs; a link is
    no menu by its class (mdBook writes each heading's text in ``<a class="header">``)."""
    classes = set((attributes.get("class") or "").split()) if tag != "a" else set()
    return attributes.get("role") in _MENU_ROLES or not classes.isdisjoint(_MENU_CLASSES)


def _block_break(tag: str) -> str:
    """A blank line around paragraphs, headings, tables and preformatted text; a line end around
    the other blocks (list items, rows, divisions)."""
    blank_line = tag in ("p", "pre", "table") or (tag[0] == "h" and tag[1:].isdigit())
    return _PARAGRAPH_BREAK if blank_line else _LINE_BREAK


def html_text(markup: str) -> tuple[str, str]:
    """``markup``'s visible text and its title, whitespace as a reader sees it: runs of spaces one
    space and no space at a line's ends (except in ``<pre>``, kept as written), block elements on
    lines of their own, at most one blank line in a row."""
    cut = markup.rfind(">") + 1  # a '<' no '>' follows is text; unescaped, Python 3.11's parser
    markup = markup[:cut] + markup[cut:].replace("<", "&lt;")  # rescans it, quadratic in its length
    parser = _VisibleText()
    try:
        parser.feed(markup)
        parser.close()
    except AssertionError as exc:  # html.parser on a malformed declaration (<![ if !mso]>)
        raise InvalidInputError(f"not readable HTML ({exc})") from None
    out: list[str] = []
    ends, last = 2, "break"  # the line ends the text so far ends with (none leads it), the last kind
    for in_main, kind, piece in parser.pieces:
        if parser.has_main and not in_main:
            continue
        if kind == "bullet" and last == "bullet":
            continue  # an empty item, or a list inside one: one bullet
        if kind == "break":
            if last == "bullet":
                continue  # a list item's paragraph starts on its bullet's line
            if out and last != "pre":
                out[-1] = out[-1].rstrip(" ")  # no space ends a line
            piece = "\n" * max(0, len(piece) - ends)
        elif kind == "text" and (ends or out[-1].endswith(" ")):
            piece = piece.lstrip(" ")  # nor starts one, nor is doubled
        if piece:
            out.append(piece)
            last = kind
            ends = ends + len(piece) if not piece.strip("\n") else len(piece) - len(piece.rstrip("\n"))
    text = re.sub(r"\n{3,}", "\n\n", _BLANK_LINE.sub("", "".join(out))).strip("\n").rstrip()
    return text, _SPACES.sub(" ", "".join(parser.title)).strip()


def decode_html(data: bytes) -> str:
    """The page's characters: UTF-16 or UTF-32 when it starts with their byte-order mark (a page
    saved as "Unicode"; the mark wins over ``<meta>``, as in browsers), else UTF-8 (with or without
    its mark), else the charset its ``<meta>`` declares; ``InvalidInputError`` when none reads it."""
    if (marked := marked_encoding(data[:4])) is not None:
        try:
            return data.decode(marked)
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"not {marked.upper()} HTML ({exc.reason}) though it starts with its mark"
            ) from None
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        declared = _META_CHARSET.search(data[:4096])
        label = declared.group(1).decode("ascii").lower() if declared else None
        codec = _CHARSETS.get(label or "")
        if codec is None or codec == "utf-8":
            said = f"it declares {label!r}" if label else "it declares no charset"
            raise InvalidInputError(f"not UTF-8 HTML ({exc.reason}) and {said}: save it as UTF-8") from None
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            raise InvalidInputError(f"cannot be read in the charset it declares ({label})") from None


def read_html_text(path: Path) -> Document:
    """``path``'s visible text as a :class:`Document` (its title in the metadata);
    ``InvalidInputError`` says why the file cannot be used (undecodable, nothing visible)."""
    text, title = html_text(decode_html(path.read_bytes()))
    no_text = "no visible text in this HTML page (scripts, menus and markup only)"
    return parsed_document(path, text, no_text, title)
