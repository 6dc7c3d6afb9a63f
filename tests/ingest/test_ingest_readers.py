"""Readers: files and folders, JSONL, Python iterables; bad input fails clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.ingest import Document, from_iterable, read_paths


def test_folders_are_read_recursively_in_a_stable_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a.md").write_text("# A\nalpha")
    (tmp_path / "b" / "c.txt").write_text("gamma")
    (tmp_path / "b" / "skip.bin").write_bytes(b"\x00\x01")
    (tmp_path / ".hidden.md").write_text("secret")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.md").write_text("internal")
    docs = list(read_paths([tmp_path]))
    assert [d.text for d in docs] == ["# A\nalpha", "gamma"]
    assert docs[0].source == (tmp_path / "a.md").resolve().as_posix()
    assert docs[1].metadata == {"filename": "c.txt"}
    assert [d.source for d in read_paths([tmp_path / "b" / "c.txt"])] == [docs[1].source]


def test_a_file_reached_twice_is_one_document(tmp_path: Path) -> None:
    """A symlink beside its target, a symlinked folder, a path given twice or inside a folder also
    given: each real file is read once (sources are resolved paths, so a second would clash)."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "real.md").write_text("giraffes")
    (docs / "link.md").symlink_to("real.md")
    (docs / "sub" / "bees.md").write_text("bees")
    (docs / "sub" / "loop").symlink_to("..")  # a folder linked into itself
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "ants.md").write_text("ants")
    (docs / "linked").symlink_to(tmp_path / "elsewhere")
    read = list(read_paths([docs, docs / "sub" / "bees.md", docs]))
    assert sorted(d.text for d in read) == ["ants", "bees", "giraffes"]
    assert len({d.source for d in read}) == 3


def test_a_missing_path_fails_before_any_document_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha")
    documents = read_paths([tmp_path / "a.md", tmp_path / "typo"])
    with pytest.raises(InvalidInputError, match="no such file or folder"):
        next(documents)


def test_jsonl_records_become_documents_with_metadata(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text('{"id": "x1", "text": "first", "lang": "en"}\n\n{"body": "second", "tags": [1]}\n')
    with pytest.raises(InvalidInputError, match=r"data\.jsonl:3: expected an object with a string 'text'"):
        list(read_paths([path]))
    path.write_text('{"id": "x1", "text": "first", "lang": "en"}\n\n{"text": "second", "tags": [1]}\n')
    docs = list(read_paths([path]))
    assert [d.text for d in docs] == ["first", "second"]
    assert docs[0].source.endswith("data.jsonl#x1") and docs[1].source.endswith("data.jsonl#3")
    assert docs[0].metadata == {"lang": "en"} and docs[1].metadata == {}
    path.write_text('{"body": "custom field"}\n')
    assert [d.text for d in read_paths([path], text_field="body")] == ["custom field"]


def test_bad_paths_and_files_fail_with_the_file_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such file"):
        list(read_paths([tmp_path / "missing"]))
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(InvalidInputError, match=r"latin1\.txt: not UTF-8"):
        list(read_paths([tmp_path]))
    (tmp_path / "latin1.txt").unlink()
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    with pytest.raises(InvalidInputError, match=r"broken\.jsonl:1: not valid JSON"):
        list(read_paths([tmp_path]))


def test_python_iterables_of_several_shapes() -> None:
    docs = list(
        from_iterable(
            [Document("s0", "zero"), "one", ("s2", "two"), {"text": "three", "source": "s3", "lang": "en"}]
        )
    )
    assert [(d.source, d.text) for d in docs] == [
        ("s0", "zero"),
        ("item-1", "one"),
        ("s2", "two"),
        ("s3", "three"),
    ]
    assert docs[3].metadata == {"lang": "en"}
    with pytest.raises(InvalidInputError, match="document 0"):
        list(from_iterable([42]))  # type: ignore[list-item]


def test_an_image_that_fails_to_read_is_skipped_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poolrag.ingest import visual_documents
    from poolrag.ingest.pdf_pages import PageRendering

    def failing(file: Path, images: PageRendering) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(visual_documents, "read_visual_file", failing)
    (tmp_path / "scan.png").write_bytes(b"\x89PNG")
    (tmp_path / "note.txt").write_text("kept")
    skipped: list = []
    docs = list(read_paths([tmp_path], images=PageRendering(), skipped=skipped))
    assert [Path(d.source).name for d in docs] == ["note.txt"]
    assert [(Path(s.path).name, s.reason) for s in skipped] == [
        ("scan.png", "cannot read: Input/output error")
    ]
    with pytest.raises(InvalidInputError, match=r"scan\.png.*cannot read: Input/output error"):
        list(read_paths([tmp_path], images=PageRendering()))


def test_reading_a_folder_holds_nothing_per_file_read(tmp_path: Path) -> None:
    """The reader kept the resolved path of every file it read (to read a file reached twice once),
    ~450 bytes a file until the last one: a million files held 450 MB, and the progress bar's count
    as much again. Between the 500th and the 2,900th of 3,000 files, the Python memory held now grows
    by less than 70 bytes a file (it grew by 1.0 MB, 1.3 MB for the count)."""
    import tracemalloc

    from poolrag.ingest.readers import count_documents

    for i in range(3000):
        folder = tmp_path / f"part-{i // 500}"
        folder.mkdir(exist_ok=True)
        (folder / f"note-{i:05d}.txt").write_text(f"note {i}")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert count_documents([tmp_path]) == 3000
        counting = tracemalloc.get_traced_memory()[1] - before
        held: dict[int, int] = {}
        for i, _ in enumerate(read_paths([tmp_path, tmp_path / "part-0"])):  # part-0 met twice: read once
            if i in (500, 2900):
                held[i] = tracemalloc.get_traced_memory()[0]
        assert i == 2999
    finally:
        tracemalloc.stop()
    assert held[2900] - held[500] < 2400 * 70, held
    assert counting < 300_000, counting


def test_reading_a_records_file_holds_nothing_per_record_read(tmp_path: Path) -> None:
    """The ids of a JSONL file's records (to name a repeated id with its first line) were a dict of
    ~270 bytes a record until the file's end: a BEIR corpus of 8.8 million passages held 2.3 GB.
    Between its 1,000th and 19,000th of 20,000 records the Python memory held now grows by less
    than 10 bytes a record (it grew by 5.4 MB), and a repeat is still named with its first line."""
    import json
    import tracemalloc

    lines = [json.dumps({"_id": f"doc{i}", "text": f"passage {i}"}) for i in range(20_000)]
    lines.insert(20, lines[3])  # doc3 again, on line 21
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    skipped: list = []
    tracemalloc.start()
    try:
        held: dict[int, int] = {}
        for i, _ in enumerate(read_paths([tmp_path], skipped=skipped)):
            if i in (1000, 19_000):
                held[i] = tracemalloc.get_traced_memory()[0]
        assert i == 19_999
    finally:
        tracemalloc.stop()
    assert held[19_000] - held[1000] < 18_000 * 10, held
    assert [str(s) for s in skipped] == [f"{tmp_path / 'corpus.jsonl'}:21: id 'doc3' again (first on line 4)"]
