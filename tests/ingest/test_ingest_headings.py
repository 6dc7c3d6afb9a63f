"""Each chunk of a Markdown or reStructuredText file names the headings of the section it starts in
(``headings``, outermost first), on every store and through ``search --json``, while its text, id
and vector stay those of the file alone (seen from outside: a hit from the middle of a long section
carried no sign of which section it was, where LangChain's and LlamaIndex's Markdown splitters
name it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.cli import main
from poolrag.ingest import Document, TokenChunker, read_paths
from poolrag.ingest.chunker import chunk_id
from poolrag.ingest.headings import MAX_LINE_CHARS, SectionHeadings

BEES = " ".join(
    f"Foragers of hive {n} dance the waggle run to show their sisters where the clover is." for n in range(6)
)
GUIDE = f"""---
title: front matter is no heading
---

# Field guide

A short note before the first section.

## Honeybees

{BEES}

```sh
# not a heading
echo bees
```

After the code the section goes on: the bees still dance in the dark hive.

Weather and
bees
-------

Rain keeps the foragers home, and cold mornings slow them down.

### Storms

Thunder sends every forager back to the hive at once.

# Appendix

Last words
=========="""  # a setext underline as the file's last line, with no line end after it

#: where each section of GUIDE starts (its heading's first line), and its headings
SECTIONS = [
    ("# Field guide", ["Field guide"]),
    ("## Honeybees", ["Field guide", "Honeybees"]),
    ("Weather and\nbees\n---", ["Field guide", "Weather and bees"]),
    ("### Storms", ["Field guide", "Weather and bees", "Storms"]),
    ("# Appendix", ["Appendix"]),
    ("Last words\n===", ["Last words"]),
]

MANUAL = """=======
 Manual
=======

Intro text of the manual.

Install
=======

Run the installer and wait.

From source
-----------

Clone the repository, then build it.

Usage
=====

Call the tool with a file.

    Indented
    ========

That indented pair was a block quote, not a title.
"""


#: the same for MANUAL: docutils levels titles by their adornment's first appearance
RST_SECTIONS = [
    ("=======\n Manual", ["Manual"]),
    ("Install\n===", ["Manual", "Install"]),
    ("From source\n---", ["Manual", "Install", "From source"]),
    ("Usage\n===", ["Manual", "Usage"]),
]


def _expected(text: str, start: int, sections: list[tuple[str, list[str]]] = SECTIONS) -> list[str] | None:
    found = None
    for marker, headings in sections:
        if 0 <= text.index(marker) <= start:
            found = headings
    return found


STORES = {"milvus": "--uri", "qdrant": "--path"}


@pytest.mark.parametrize("kind", list(STORES))
def test_each_stored_chunk_names_the_headings_of_its_section(
    kind: str, tmp_path: Path, minilm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip({"milvus": "pymilvus", "qdrant": "qdrant_client"}[kind])
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE)
    (docs / "notes.txt").write_text("# a plain text file has no headings\n\nIts lines are only text.")
    where = str(tmp_path / ("m.db" if kind == "milvus" else kind))
    store = ["--store", kind, STORES[kind], where, "--collection", "docs", "--model", str(minilm_path)]
    ingest = ["ingest", str(docs), *store, "--chunk-tokens", "16", "--no-cache", "-q", "--json"]
    assert main(ingest) == 0
    capsys.readouterr()
    assert main(["search", "bees dance in the hive", *store, "-k", "100", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    guide = [hit for hit in hits if hit["source"].endswith("guide.md")]
    assert len(guide) > 10  # the Honeybees section alone is several chunks
    for hit in guide:
        assert hit["text"] == GUIDE[hit["start"] : hit["end"]]  # no heading added to the text
        assert hit["id"] == chunk_id(hit["source"], hit["start"], hit["text"])
        assert hit["metadata"].get("headings") == _expected(GUIDE, hit["start"]), hit
    bees = ["Field guide", "Honeybees"]
    (code,) = [hit for hit in guide if "echo bees" in hit["text"]]
    assert code["metadata"]["headings"] == bees  # '# not a heading' in the code block is none
    assert (
        sum(hit["metadata"].get("headings") == bees and "Honeybees" not in hit["text"] for hit in guide) > 3
    )
    (notes,) = [hit for hit in hits if hit["source"].endswith("notes.txt")]
    assert "headings" not in notes["metadata"]
    assert main(["search", "thunder storms", *store, "-k", "1"]) == 0
    assert "] Field guide > Weather and bees > Storms\n" in capsys.readouterr().out
    assert main(ingest) == 0  # the same ids: a re-run stores nothing new
    assert json.loads(capsys.readouterr().out)["upserted"] == 0


@pytest.mark.parametrize("pieces", [None, 40, 301, 1000])
def test_a_file_read_in_pieces_has_the_headings_it_has_whole(
    pieces: int | None, tmp_path: Path, minilm_engine
) -> None:
    (tmp_path / "guide.md").write_text(GUIDE)
    (tmp_path / "manual.rst").write_text(MANUAL)
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=12, overlap=3)
    guide, manual = read_paths([tmp_path / "guide.md", tmp_path / "manual.rst"])
    whole = [(c.start, c.metadata.get("headings")) for c in chunker.split(guide)]
    assert whole == [(start, _expected(GUIDE, start)) for start, _ in whole]
    assert [(c.start, c.metadata.get("headings")) for c in chunker.split(guide, pieces)] == whole
    rst = [(c.start, c.metadata.get("headings")) for c in chunker.split(manual, pieces)]
    assert rst == [(start, _expected(MANUAL, start, RST_SECTIONS)) for start, _ in rst]
    assert len({str(headings) for _, headings in rst}) == 4  # the indented pair is no title


def test_a_document_given_in_python_is_read_by_its_name(minilm_engine) -> None:
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=64)
    (md,) = chunker.split(Document("notes.md", "# Notes\n\nBees dance."))
    (text,) = chunker.split(Document("item-0", "# Notes\n\nBees dance."))
    assert md.metadata == {"headings": ["Notes"]} and text.metadata == {}
    assert (md.text, md.token_ids) == (text.text, text.token_ids)  # nothing added to what is embedded


def test_a_utf8_byte_order_mark_hides_no_heading(tmp_path: Path, minilm_engine) -> None:
    """A file saved as UTF-8 with a byte-order mark (Notepad's "UTF-8 with BOM") is read with the mark
    as its first character: its first heading, the document's title, was named on no chunk."""
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=64)
    (tmp_path / "notes.md").write_text("\ufeff# Notes\n\nBees dance.\n", encoding="utf-8")
    (tmp_path / "manual.rst").write_text("\ufeffManual\n======\n\nBees dance.\n", encoding="utf-8")
    for document in read_paths([tmp_path / "notes.md", tmp_path / "manual.rst"]):
        (chunk,) = chunker.split(document)
        assert chunk.metadata["headings"] == ["Notes" if document.source.endswith(".md") else "Manual"]


@pytest.mark.parametrize(
    "block",
    [
        "- Install the hive\n  and wait a week",  # a list item's indented line
        "- Install the hive\nand wait a week",  # a lazy line of a list item
        "> Install the hive\nand wait a week",  # of a quote
        '<div class="note">\nInstall the hive',  # of an HTML block
    ],
)
def test_a_line_of_a_list_or_quote_over_a_rule_is_no_heading(block: str, minilm_engine) -> None:
    """A ``---`` rule right under a list, quote or HTML block is a thematic break: the block's last
    line was named as the heading of every chunk after it (CommonMark: a setext underline cannot go
    on a lazy line, and the block's lines are no paragraph of their own)."""
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=4, overlap=0)
    text = f"# Guide\n\n{block}\n---\n\nBees dance.\n\nAfter a rule\n============\n\nThey rest."
    rule, after = text.index("\n---\n"), text.index("After a rule")
    starts = {c.start: c.metadata.get("headings") for c in chunker.split(Document("guide.md", text))}
    assert any(rule < start < after for start in starts)
    assert {str(h) for start, h in starts.items() if start < after} == {str(["Guide"])}
    assert starts[after] == ["After a rule"]  # a paragraph after the rule still is a title


def test_the_chunks_of_a_huge_line_wait_for_no_end_of_it(minilm_engine) -> None:
    """A line still being read may be a heading, so the chunks in it waited for its end: a Markdown
    file of one 16 MB line held its whole text and all its 14,914 chunks at once (546 MB resident
    where the same file as .txt took 347 MB), and each piece copied the line read so far. A line over
    ``MAX_LINE_CHARS`` is prose (no heading is that long): what is read of it is settled."""
    line = "Bees dance in the hive. " * (MAX_LINE_CHARS // 12)  # two pieces of a line twice the limit
    heading = "# Guide\n\n"
    headings = SectionHeadings(rst=False)
    read = headings.read(iter([heading, line, line, "\n---\n\nThey rest."]))
    assert [next(read), next(read)] == [heading, line]
    assert headings.settled == len(heading) + len(line)  # was len(heading): the line's start
    assert list(read) == [line, "\n---\n\nThey rest."]
    assert headings.at(len(heading) + 2 * len(line) + 10) == ("Guide",)  # the long line is no title
    text = heading + line + line + "\n---\n\nThey rest."
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=256)
    chunks = chunker.split(Document("guide.md", text), piece_chars=MAX_LINE_CHARS // 4)
    assert all(chunk.metadata["headings"] == ["Guide"] for chunk in chunks)


#: Drops ``headings`` from every stored payload, as poolrag wrote them before 4945b0e (59159ef, say):
#: the same ids, texts and vectors. Prints how many payloads held them.
_STRIP_HEADINGS = """
import sys
kind, where = sys.argv[1:]
if kind == "qdrant":
    from qdrant_client import QdrantClient

    client = QdrantClient(path=where)
    points, _ = client.scroll("docs", limit=1000, with_payload=True)
    headed = [p.id for p in points if "headings" in (p.payload or {})]
    client.delete_payload("docs", keys=["headings"], points=headed)
else:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=where)
    client.load_collection("docs")  # poolrag leaves it released
    rows = client.query("docs", filter='id != ""', output_fields=["*"], limit=1000)
    headed = [{k: v for k, v in row.items() if k != "headings"} for row in rows if "headings" in row]
    client.delete("docs", ids=[row["id"] for row in headed])  # an upsert keeps a dynamic field it lacks
    client.insert("docs", headed)
client.close()
print(len(headed))
"""


def _as_written_before_headings(kind: str, where: str) -> int:
    """Run :data:`_STRIP_HEADINGS` in a process of its own, as the older poolrag's run was (this
    process's Milvus Lite server and Qdrant clients never see another client's writes)."""
    done = subprocess.run(
        [sys.executable, "-c", _STRIP_HEADINGS, kind, where], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


@pytest.mark.parametrize("kind", list(STORES))
def test_a_collection_stored_before_headings_is_not_rewritten(
    kind: str, tmp_path: Path, minilm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/ingest.md: 'a re-run skips chunks stored before headings existed'. After an upgrade,
    every Markdown chunk's stored payload lacked the new key, so the re-run rewrote them all (and
    with --no-cache embedded them all again)."""
    pytest.importorskip({"milvus": "pymilvus", "qdrant": "qdrant_client"}[kind])
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE)
    (docs / "manual.rst").write_text(MANUAL)
    where = str(tmp_path / ("m.db" if kind == "milvus" else kind))
    store = ["--store", kind, STORES[kind], where, "--collection", "docs", "--model", str(minilm_path)]
    ingest = ["ingest", str(docs), *store, "--chunk-tokens", "16", "--no-cache", "-q", "--json"]
    assert main(ingest) == 0
    stored = json.loads(capsys.readouterr().out)["upserted"]
    assert _as_written_before_headings(kind, where) > stored // 2  # the front matter has none
    assert main(ingest) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["chunks_existing"], report["upserted"], report["embedded"]) == (stored, 0, 0)
