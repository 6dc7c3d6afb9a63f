"""Files that open with a byte-order mark, as Windows tools write them (Notepad's "UTF-8 with BOM"
and "Unicode", PowerShell 5's ``Out-File``, Excel's "CSV UTF-8", a page saved as "Unicode"): every
reader takes the mark as the encoding it names, so each file's text reaches the store whole."""

from __future__ import annotations

import codecs
from pathlib import Path

from qdrant_client import QdrantClient

from poolrag.cli import main

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
