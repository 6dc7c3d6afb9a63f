"""Section headings of Markdown and reStructuredText files: which section each chunk is in.

A chunk from the middle of a long section carries no heading of its own text, so a hit could not
say where it came from (LangChain's ``MarkdownHeaderTextSplitter`` puts ``Header 1``, ``Header 2``
in each split's metadata, LlamaIndex's ``MarkdownNodeParser`` a ``header_path``). The headings are
only read: a chunk's text, id and vector are what they were without them. Markdown's ATX (``#``)
and setext (underlined) headings count, not a ``#`` line inside a fenced code block, YAML front
matter or an indented block; reStructuredText's titles are underlined (and optionally overlined)
lines, levelled in the order their styles first appear, as docutils levels them. Lines are read as
the chunker reads pieces, so a file read in pieces has the headings it has when read whole.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from pathlib import PurePath

MARKDOWN_SUFFIXES = (".md", ".markdown")
RST_SUFFIXES = (".rst",)

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
#: lines of a paragraph a setext underline makes a heading (longer is prose; chunks wait on it)
_MAX_TITLE_LINES = 4
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
#: a line that starts a block other than a paragraph (a list item, a quote, a table, HTML), which
#: the lines after it go on until a blank line, so no setext underline makes any of them a heading
_NOT_PARAGRAPH = re.compile(r" {0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|[>|<])")
_THEMATIC_BREAK = re.compile(r" {0,3}([-*_])[ \t]*(?:\1[ \t]*){2,}")
#: what docutils accepts as a title's adornment: one printable non-alphanumeric ASCII character
_RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*")
#: a line longer is prose, never a heading nor an underline: only its start is kept, and the chunks
#: in it need not wait for its end (a file of one huge line was held whole, all its chunks too)
MAX_LINE_CHARS = 1 << 16


def section_headings(source: str) -> SectionHeadings | None:
    """A reader of the headings of the document named ``source``, or ``None`` for a kind of text
    without headings (plain text, records, web pages)."""
    suffix = PurePath(source).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return SectionHeadings(rst=False)
    if suffix in RST_SUFFIXES:
        return SectionHeadings(rst=True)
    return None


class SectionHeadings:
    """The headings of one document, read from its pieces as they pass (:meth:`read`).

    :meth:`at` answers the heading path (outermost first) in force at a character offset below
    :attr:`settled`: every heading starting before it is known (a setext or RST title is known only
    once the line after it is read).
    """

    def __init__(self, *, rst: bool) -> None:
        self._rst = rst
        self._starts: list[int] = []  # where each heading's section starts (its first line)
        self._paths: list[tuple[str, ...]] = []
        self._stack: list[tuple[int, str]] = []  # (level, text) of the headings in force
        self._styles: list[tuple[str, bool]] = []  # RST: adornment styles in order of appearance
        self._partial = ""  # the line the last piece ended in
        self._offset = 0  # where ``_partial`` starts
        self._dropped = 0  # characters of the partial line past MAX_LINE_CHARS, not kept
        self._lines: list[tuple[int, str]] = []  # the last complete lines: (start, text)
        self._paragraph: list[str] = []  # Markdown: the lines of the paragraph going on
        self._paragraph_start = 0
        self._block = False  # Markdown: a list item, quote, table or HTML block goes on
        self._fence = ""  # Markdown: the open code fence's marker
        self._front_matter = False
        self.settled = 0

    def read(self, pieces: Iterator[str]) -> Iterator[str]:
        """``pieces`` unchanged, their lines read on the way; at their end everything is settled."""
        for piece in pieces:
            self._feed(piece)
            yield piece
        if self._partial:
            self._line(self._offset, self._partial, long=self._dropped > 0)
        self.settled = 1 << 62

    def at(self, offset: int) -> tuple[str, ...]:
        """The heading path in force at ``offset``: the headings of the section it is in."""
        k = bisect.bisect_right(self._starts, offset)
        return self._paths[k - 1] if k else ()

    def _feed(self, piece: str) -> None:
        if self._dropped:  # a long line goes on: only where it ends matters
            if (end := piece.find("\n")) < 0:
                self._dropped += len(piece)
                self.settled = self._offset + len(self._partial) + self._dropped
                return
            self._line(self._offset, self._partial, long=True)
            self._offset += len(self._partial) + self._dropped + end + 1
            self._partial, self._dropped, piece = "", 0, piece[end + 1 :]
        text = self._partial + piece
        start = 0
        while (end := text.find("\n", start)) >= 0:
            line = text[start:end].rstrip("\r")
            self._line(self._offset + start, line[:MAX_LINE_CHARS], long=len(line) > MAX_LINE_CHARS)
            start = end + 1
        self._partial = text[start : start + MAX_LINE_CHARS]
        self._dropped = len(text) - start - len(self._partial)
        self._offset += start
        self.settled = self._offset + len(text) - start if self._dropped else self._undecided()

    def _undecided(self) -> int:
        """Where the first line that may still start a title starts: Markdown's paragraph going on
        (an underline may follow it), RST's last two lines (an overline and its title)."""
        if self._rst:
            return self._lines[0][0] if len(self._lines) == 2 else self._offset
        if self._paragraph and len(self._paragraph) <= _MAX_TITLE_LINES:
            return self._paragraph_start
        return self._offset

    def _line(self, start: int, line: str, *, long: bool = False) -> None:
        if start == 0:  # a UTF-8 file's byte-order mark (Notepad's) is read as a character
            line = line.removeprefix("\ufeff")
        if long:  # prose: it ends a title's chances, whatever it starts with
            self._paragraph = [] if self._fence or self._block else [""] * (_MAX_TITLE_LINES + 1)
        elif self._rst:
            self._rst_line(start, line)
        else:
            self._markdown_line(start, line)
        self._lines = [*self._lines[-1:], (start, line)]

    def _heading(self, start: int, level: int, text: str) -> None:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))
        self._starts.append(start)
        self._paths.append(tuple(t for _, t in self._stack))

    def _markdown_line(self, start: int, line: str) -> None:
        if self._front_matter or (start == 0 and line.rstrip() == "---"):
            self._front_matter = start == 0 or line.rstrip() not in ("---", "...")
            return
        fence = _FENCE.match(line)
        if self._fence:  # closed by a bare run of its character at least as long
            if fence and fence[1][0] == self._fence[0] and len(fence[1]) >= len(self._fence):
                self._fence = self._fence if line[fence.end() :].strip() else ""
            return
        if fence and not (fence[1][0] == "`" and "`" in line[fence.end() :]):
            self._fence, self._paragraph, self._block = fence[1], [], False
            return
        if (atx := _ATX.fullmatch(line)) is not None:
            self._paragraph, self._block = [], False
            if atx[2] and atx[2].strip("#"):
                self._heading(start, len(atx[1]), atx[2].strip())
            return
        if self._paragraph and (setext := _SETEXT.fullmatch(line)) is not None:
            if len(self._paragraph) <= _MAX_TITLE_LINES:
                title = " ".join(part.strip() for part in self._paragraph)
                self._heading(self._paragraph_start, 1 if setext[1][0] == "=" else 2, title)
            self._paragraph = []
            return
        if not line.strip() or _THEMATIC_BREAK.fullmatch(line) or _SETEXT.fullmatch(line):
            self._paragraph, self._block = [], False
            return
        if _NOT_PARAGRAPH.match(line):
            self._paragraph, self._block = [], True
            return
        if self._block or (not self._paragraph and line[:4] == "    "):
            return  # a lazy line of the block going on, or indented code
        if not self._paragraph:
            self._paragraph_start = start
        if len(self._paragraph) <= _MAX_TITLE_LINES:  # a longer one is no title: its lines are not kept
            self._paragraph.append(line)

    def _rst_line(self, start: int, line: str) -> None:
        """A title is a line with an adornment under it at least as long, after a blank line or
        the same adornment over it; the title of a line of text starts at its first column."""
        adornment = _RST_ADORNMENT.fullmatch(line.rstrip())
        if adornment is None or not self._lines:
            return
        title_start, title = self._lines[-1]
        above = self._lines[0] if len(self._lines) == 2 else None
        overlined = above is not None and above[1].rstrip() == line.rstrip()
        if (
            not title.strip()
            or _RST_ADORNMENT.fullmatch(title.rstrip())
            or len(line.rstrip()) < len(title.strip())
            or not (overlined or (not title[0].isspace() and (above is None or not above[1].strip())))
        ):
            return
        style = (adornment[1], overlined)
        if style not in self._styles:
            self._styles.append(style)
        self._heading(
            above[0] if overlined and above else title_start, self._styles.index(style), title.strip()
        )
