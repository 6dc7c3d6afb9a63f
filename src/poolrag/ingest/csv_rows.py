"""A CSV file as records, one per row: a spreadsheet of FAQs or products read the way LangChain's
``CSVLoader`` reads it, with the header naming each cell.

A row's text is its ``text_field`` column when the header has one, and its other cells are payload
(as a JSONL record's fields; an ``id`` or ``_id`` column names the record, its line where that cell
is empty). Without that column the
text is every filled cell but the id as a ``column: value`` line, CSVLoader's page content, so a
sheet of question and answer columns is embedded whole. The delimiter is the commonest of ``,``, ``;`` and
tab outside quotes in the header line (a spreadsheet in a locale whose decimal mark is a comma saves
``;``; a quoted column name may hold the others); Excel's UTF-8 byte-order mark is skipped, and its
"Unicode Text" (UTF-16 with its mark, tab-separated) is read in UTF-16.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from poolrag.ingest.readers import records_encoding
from poolrag.ingest.record_rules import NotARecord

_DELIMITERS = (",", ";", "\t")
_ID_COLUMNS = ("id", "_id")
#: Most characters in one cell. csv's default, 131,072, refused a long text kept in one cell (a
#: scraped page, an article exported from a database), and csv cannot read on after it; a quote
#: left open is told by :func:`_quote_left_open`, this bounds what it reads into one cell first.
MAX_CELL_CHARS = 1 << 26


def csv_records(path: Path, text_field: str) -> Iterator[tuple[int, dict[str, str] | NotARecord]]:
    """``(line, record)`` for each row with a filled cell, ``line`` where the row starts; a row that
    is no record gives a :class:`NotARecord`, and a file csv cannot read on gives one last."""
    if csv.field_size_limit() < MAX_CELL_CHARS:  # csv's limit is process-wide: only ever raised
        csv.field_size_limit(MAX_CELL_CHARS)
    with path.open(encoding=records_encoding(path), newline="") as handle:
        first = handle.readline()
        handle.seek(0)
        delimiter = _delimiter(first)
        read: list[str] = []  # the lines of the row csv is reading (it reads no further)

        def lines() -> Iterator[str]:
            for line in handle:
                read.append(line)
                yield line

        rows = csv.reader(lines(), delimiter=delimiter)
        header = next(rows, None)
        if header is None:
            return
        # a column the header leaves unnamed (Excel saves ",," for cells once used right of a
        # table) is named by its place, so two of them are not one name said twice
        header = [name if name.strip() else f"column {place}" for place, name in enumerate(header, 1)]
        if repeated := sorted({name for name in header if header.count(name) > 1}):
            yield 1, NotARecord(f"the header names {', '.join(map(repr, repeated))} twice")
            return
        start = rows.line_num + 1
        read.clear()
        try:
            for row in rows:
                if len(read) > 1 and _quote_left_open(read, delimiter):
                    yield (
                        start,
                        NotARecord(
                            f"a quote opened in this row is never closed: csv reads the {len(read) - 1} "
                            "lines after it as one cell; the rows after it are not read"
                        ),
                    )
                    return
                read.clear()
                if any(cell.strip() for cell in row):
                    yield start, _record(header, row, text_field)
                start = rows.line_num + 1
        except csv.Error as exc:  # a cell over MAX_CELL_CHARS (a quote left open)
            yield start, NotARecord(f"not readable CSV ({exc}); the rows after it are not read")


def _quote_left_open(lines: list[str], delimiter: str) -> bool:
    """Whether a row of several ``lines`` ends inside a quoted cell: csv reads a stray quote as
    opening a cell that holds the rest of the file (up to :data:`MAX_CELL_CHARS`), unsaid. Only a
    strict reader tells the end of the file inside a quote from a cell that closed."""
    try:
        for _ in csv.reader(lines, delimiter=delimiter, strict=True):
            pass
    except csv.Error as exc:
        return "unexpected end of data" in str(exc)
    return False


def _delimiter(header: str) -> str:
    """The commonest of :data:`_DELIMITERS` outside quoted cells of ``header`` (``,`` on a tie)."""
    counts = dict.fromkeys(_DELIMITERS, 0)
    quoted = False
    for char in header:
        if char == '"':  # a doubled quote inside a quoted cell closes and reopens it: no change
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    return max(_DELIMITERS, key=counts.__getitem__)


def _record(header: list[str], row: list[str], text_field: str) -> dict[str, str] | NotARecord:
    if len(row) > len(header):
        return NotARecord(f"{len(row)} cells in a row under a header of {len(header)} columns")
    cells = dict(zip(header, row + [""] * (len(header) - len(row)), strict=True))
    for name in _ID_COLUMNS:  # an empty id cell is no id: the row's line names it, as without one
        if name in cells and not cells[name].strip():
            del cells[name]
    if text_field in cells:
        return cells
    names = {name: cells.pop(name) for name in _ID_COLUMNS if name in cells}  # not text to embed
    lines = (f"{name}: {value}" for name, value in cells.items() if value.strip())
    return {text_field: "\n".join(lines), **names}
