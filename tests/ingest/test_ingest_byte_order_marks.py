"""Files that open with a byte-order mark, as Windows tools write them (Notepad's "UTF-8 with BOM"
and "Unicode", PowerShell 5's ``Out-File``, Excel's "CSV UTF-8", a page saved as "Unicode"): every
reader takes the mark as the encoding it names, so each file's text reaches the store whole."""

from __future__ import annotations

import codecs
from pathlib import Path

from ingest_support import read_folder
from qdrant_client import QdrantClient

from poolrag.cli import main
from poolrag.ingest import read_paths
from poolrag.ingest.readers import count_documents

PAGE = '<html><head><meta charset="utf-16"><title>Tea</title></head><body><p>{}</p></body></html>'


def _ingest(docs: Path, tmp_path: Path, minilm_path: Path, capsys) -> tuple[dict[str, str], list[str]]:
    """``poolrag ingest`` of ``docs`` into Qdrant local: ``source`` file name (and record id) -> the
    text stored for it, read back with Qdrant's own client, and the store options for ``search``."""
    store = ["--model", str(minilm_path), "--store", "qdrant", "--path", str(tmp_path / "q")]
    store += ["--collection", "c"]
    assert main(["ingest", str(docs), *store, "--no-cache", "-q", "--checkpoint", str(tmp_path / "ck")]) == 0
    assert "left out" not in capsys.readouterr().err
    client = QdrantClient(path=str(tmp_path / "q"))
    try:
        points, _ = client.scroll("c", limit=100, with_payload=True)
    finally:
        client.close()
    return {Path(p.payload["source"]).name: p.payload["text"] for p in points}, store


def test_a_marked_jsonl_file_keeps_its_first_record(tmp_path: Path, minilm_path: Path, capsys) -> None:
    """Seen from outside: a JSONL file with UTF-8's mark lost its first record (``bom.jsonl:1: not
    valid JSON (Unexpected UTF-8 BOM (decode using utf-8-sig))``), though ``poolrag eval`` reads
    the same file whole."""
    docs = tmp_path / "docs"
    docs.mkdir()
    records = '{"id": "j1", "text": "Volcanoes erupt lava."}\n{"id": "j2", "text": "Glaciers carve."}\n'
    (docs / "bom.jsonl").write_bytes(codecs.BOM_UTF8 + records.encode())
    stored, store = _ingest(docs, tmp_path, minilm_path, capsys)
    assert stored == {"bom.jsonl#j1": "Volcanoes erupt lava.", "bom.jsonl#j2": "Glaciers carve."}
    assert main(["search", "volcano lava", *store, "-k", "1"]) == 0
    assert f"{(docs / 'bom.jsonl').resolve()}#j1" in capsys.readouterr().out


def test_records_files_in_utf16_are_read_by_their_mark(tmp_path: Path) -> None:
    """PowerShell 5's ``python export.py > corpus.jsonl`` writes UTF-16 with its mark, and so does
    Excel's "Unicode Text" (tab-separated) saved as .csv: both were left out as ``not UTF-8 text
    (invalid start byte): save it as UTF-8 (Latin-1 and Windows code pages are not guessed)``."""
    docs = tmp_path / "docs"
    docs.mkdir()
    records = '{"id": "j1", "text": "Volcanoes erupt lava."}\r\n{"id": "j2", "text": "Glaciers carve."}\r\n'
    (docs / "powershell.jsonl").write_bytes(codecs.BOM_UTF16_LE + records.encode("utf-16-le"))
    sheet = "question\tanswer\r\nWhat is a crème brûlée?\tA custard.\r\n"
    (docs / "excel.csv").write_bytes(codecs.BOM_UTF16_LE + sheet.encode("utf-16-le"))
    skipped: list = []
    read = {Path(d.source).name: d.text for d in read_paths([docs], skipped=skipped)}
    assert [str(s) for s in skipped] == []
    assert read == {
        "excel.csv#2": "question: What is a crème brûlée?\nanswer: A custard.",
        "powershell.jsonl#j1": "Volcanoes erupt lava.",
        "powershell.jsonl#j2": "Glaciers carve.",
    }
    assert count_documents(docs) == 3


def test_a_page_saved_as_utf16_is_read_by_its_mark(tmp_path: Path, minilm_path: Path, capsys) -> None:
    """Seen from outside: a page saved as "Unicode" (UTF-16 with its mark) was left out as ``not
    UTF-8 HTML (invalid start byte) and it declares no charset``, though its ``<meta>`` says UTF-16."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "le.html").write_bytes(
        codecs.BOM_UTF16_LE + PAGE.format("Green tea is steamed.").encode("utf-16-le")
    )
    be = PAGE.format("Café crème, s’il vous plaît.").encode("utf-16-be")
    (docs / "be.html").write_bytes(codecs.BOM_UTF16_BE + be)
    read, reasons = read_folder(docs)
    assert sorted(read) == ["be.html", "le.html"] and reasons == {}
    stored, store = _ingest(docs, tmp_path, minilm_path, capsys)
    assert stored == {"le.html": "Green tea is steamed.", "be.html": "Café crème, s’il vous plaît."}
    assert main(["search", "steamed green tea", *store, "-k", "1"]) == 0
    assert f"{(docs / 'le.html').resolve()}" in capsys.readouterr().out


def test_a_page_whose_mark_its_bytes_break_says_so(tmp_path: Path) -> None:
    """A UTF-16 page cut off mid-character is named as UTF-16 that does not decode, not as a page
    that "declares no charset"."""
    page = codecs.BOM_UTF16_LE + PAGE.format("Tea.").encode("utf-16-le")
    (tmp_path / "cut.html").write_bytes(page + b"<")
    read, reasons = read_folder(tmp_path)
    assert read == [] and reasons["cut.html"].startswith("not UTF-16 HTML (truncated data)")
