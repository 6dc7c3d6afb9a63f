"""CSV files: one document per row, named by its id column or line, as a spreadsheet is read."""

from __future__ import annotations

import csv
from pathlib import Path

from poolrag.ingest import read_paths
from poolrag.ingest.readers import count_documents


def _write(path: Path, rows: list[list[str]], *, delimiter: str = ",", encoding: str = "utf-8") -> Path:
    with path.open("w", encoding=encoding, newline="") as handle:
        csv.writer(handle, delimiter=delimiter).writerows(rows)
    return path


def _read(folder: Path) -> tuple[list, dict[str, str]]:
    skipped: list = []
    documents = list(read_paths(folder, skipped=skipped))
    return documents, {f"{Path(s.path).name}:{s.line}": s.reason for s in skipped}


def test_a_sheet_without_a_text_column_is_read_as_column_value_lines(tmp_path: Path) -> None:
    """A FAQ sheet saved by a spreadsheet in a locale that writes ';' (with Excel's byte-order mark):
    each row is one document, every filled cell but the id a ``column: value`` line (LangChain's
    CSVLoader's page content), named by its id; a quoted cell keeps its delimiter and line break,
    and a blank row is no record."""
    path = _write(
        tmp_path / "faq.csv",
        [
            ["id", "question", "answer", "notes"],
            ["q1", "How do I feed a starter?", "Flour and water;\nonce a day", ""],
            ["", "", "", ""],
            ["q2", "Which flour?", "Rye or wheat", "unsure"],
        ],
        delimiter=";",
        encoding="utf-8-sig",
    )
    documents, skipped = _read(tmp_path)
    assert not skipped
    sheet = path.resolve().as_posix()
    assert [(d.source, d.text, d.metadata) for d in documents] == [
        (f"{sheet}#q1", "question: How do I feed a starter?\nanswer: Flour and water;\nonce a day", {}),
        (f"{sheet}#q2", "question: Which flour?\nanswer: Rye or wheat\nnotes: unsure", {}),
    ]
    assert count_documents(tmp_path) == 2


def test_a_text_column_is_the_text_and_the_other_columns_are_payload(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "passages.csv",
        [["text", "category"], ["Tides follow the moon.", "sea"], ["Rain falls from clouds.", "sky"]],
    )
    documents, skipped = _read(tmp_path)
    assert not skipped
    assert [(d.source, d.text, d.metadata) for d in documents] == [
        (f"{path.resolve().as_posix()}#2", "Tides follow the moon.", {"category": "sea"}),
        (f"{path.resolve().as_posix()}#3", "Rain falls from clouds.", {"category": "sky"}),
    ]
    body = [d.text for d in read_paths(path, text_field="category")]
    assert body == ["sea", "sky"]


def test_a_row_whose_id_cell_is_empty_is_named_by_its_line(tmp_path: Path) -> None:
    """A sheet whose id column is filled on some rows only: the others are named by their line, as
    in a sheet without ids, not all by the id '' (the second of which was left out as a repeat)."""
    path = _write(
        tmp_path / "faq.csv",
        [
            ["id", "question", "answer"],
            ["q1", "How?", "Like this"],
            ["", "Why?", "Because"],
            [" ", "When?", "Now"],
        ],
    )
    documents, skipped = _read(tmp_path)
    assert not skipped
    sheet = path.resolve().as_posix()
    assert [(d.source, d.text) for d in documents] == [
        (f"{sheet}#q1", "question: How?\nanswer: Like this"),
        (f"{sheet}#3", "question: Why?\nanswer: Because"),
        (f"{sheet}#4", "question: When?\nanswer: Now"),
    ]
    texts = _write(tmp_path / "texts.csv", [["_id", "text"], ["", "Tides"], ["", "Rain"]])
    assert [d.source for d in read_paths(texts)] == [f"{texts.resolve().as_posix()}#{n}" for n in (2, 3)]


def test_columns_the_header_leaves_unnamed_are_named_by_their_place(tmp_path: Path) -> None:
    """Excel saves ',,' after the header and each row when cells right of the table were once used:
    those unnamed columns are read (named by their place), not a header naming '' twice."""
    _write(
        tmp_path / "faq.csv",
        [["question", "answer", "", ""], ["How?", "Like this", "", ""], ["Why?", "Because", "", "see p. 4"]],
    )
    _write(tmp_path / "passages.csv", [["text", "", ""], ["Tides follow the moon.", "sea", ""]])
    documents, skipped = _read(tmp_path)
    assert not skipped
    assert [(d.text, d.metadata) for d in documents] == [
        ("question: How?\nanswer: Like this", {}),
        ("question: Why?\nanswer: Because\ncolumn 4: see p. 4", {}),
        ("Tides follow the moon.", {"column 2": "sea", "column 3": ""}),
    ]


def test_a_bad_row_is_left_out_alone_naming_its_line(tmp_path: Path) -> None:
    """A row with more cells than the header, an id seen before: that row is in the report with the
    line it starts on (after a quoted line break), and the rows after it are read."""
    _write(
        tmp_path / "rows.csv",
        [
            ["id", "text"],
            ["a", "first\nof two lines"],
            ["b", "second", "a stray cell"],
            ["a", "the first id again"],
            ["c", "third"],
        ],
    )
    documents, skipped = _read(tmp_path)
    assert [d.text for d in documents] == ["first\nof two lines", "third"]
    assert skipped == {
        "rows.csv:4": "3 cells in a row under a header of 2 columns",
        "rows.csv:5": "id 'a' again (first on line 2)",
    }
    assert count_documents(tmp_path) == 4  # each row read or reported: a progress bar's total


def test_a_cell_longer_than_csv_s_default_limit_is_read_and_so_are_the_rows_after_it(tmp_path: Path) -> None:
    """A scraped page kept in one cell (200,000 characters) was left out as 'field larger than field
    limit (131072)', and with it every row after it, unsaid: csv cannot read on after that error."""
    page = "A scraped article's words, none of them special. " * 4000
    _write(tmp_path / "pages.csv", [["id", "text"], ["a", "short"], ["b", page], ["c", "after the page"]])
    documents, skipped = _read(tmp_path)
    assert skipped == {}
    assert [d.text for d in documents] == ["short", page, "after the page"]


def test_a_quote_left_open_stops_the_file_and_says_the_rows_after_it_are_not_read(tmp_path: Path) -> None:
    rows = 'id,text\na,first\nb,"an open quote\n' + ("x" * 1000 + "\n") * 70_000 + "c,never a row\n"
    (tmp_path / "open.csv").write_text(rows, encoding="utf-8")
    documents, skipped = _read(tmp_path)
    assert [d.text for d in documents] == ["first"]
    assert skipped["open.csv:3"].startswith("not readable CSV (field larger than field limit")
    assert skipped["open.csv:3"].endswith("; the rows after it are not read")


def test_files_that_are_no_sheet_are_one_line_each(tmp_path: Path) -> None:
    """Excel's plain 'CSV' (the Windows code page) says to save as CSV UTF-8; a header naming a
    column twice cannot say which cell is which."""
    _write(tmp_path / "excel.csv", [["question", "answer"], ["Crème brûlée?", "Oui"]], encoding="cp1252")
    _write(tmp_path / "twice.csv", [["name", "text", "name"], ["a", "b", "c"]])
    (tmp_path / "empty.csv").write_text("")
    documents, skipped = _read(tmp_path)
    assert documents == []
    assert skipped["excel.csv:None"].endswith("): save it as CSV UTF-8")
    assert skipped["excel.csv:None"].startswith("not UTF-8 text (")
    assert skipped["twice.csv:1"] == "the header names 'name' twice"
    assert count_documents(tmp_path) == 2


def test_a_delimiter_inside_a_quoted_column_name_does_not_count(tmp_path: Path) -> None:
    """Seen from outside: a header whose quoted first column holds two ';' and the real ',' once was
    read with ';', and every row was mangled (Python's csv.Sniffer finds ',')."""
    path = tmp_path / "q.csv"
    path.write_text('"Name; full; legal",text\n"Smith; John; Q",Row about pelicans\n')
    documents, skipped = _read(tmp_path)
    assert not skipped
    assert [(d.source, d.text, d.metadata) for d in documents] == [
        (f"{path.resolve().as_posix()}#2", "Row about pelicans", {"Name; full; legal": "Smith; John; Q"})
    ]


def test_a_quote_left_open_is_said_whatever_the_length_of_the_rest_of_the_file(tmp_path: Path) -> None:
    """A stray quote (``5" screen`` typed as a cell's first character) made csv read the 3,000 rows
    after it as one cell: ingested as one document of 300,000 characters, unsaid, where up to
    b192f9ce csv's 131,072-character limit said 'not readable CSV' for it."""
    rows = 'id,text\na,first\nb,"an open quote\n' + "".join(
        f"r{i},row {i} of the sheet\n" for i in range(3000)
    )
    (tmp_path / "open.csv").write_text(rows, encoding="utf-8")
    documents, skipped = _read(tmp_path)
    assert [d.text for d in documents] == ["first"]
    assert skipped["open.csv:3"].startswith("a quote opened in this row is never closed")
    assert skipped["open.csv:3"].endswith("; the rows after it are not read")
