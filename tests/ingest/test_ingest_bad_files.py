"""Issue 13, item 2 (readers): files that cannot be read are skipped and listed, or stop the run
at once without a ``skipped`` list; FIFOs and other non-regular files are never opened."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.ingest import read_paths
from poolrag.ingest.readers import SkippedFile


def _unreadable(path: Path) -> None:
    """A file whose read fails: chmod 000 for a normal user; as root (which reads anything), a
    link to /proc/self/mem, which opens but fails to read at offset 0."""
    if os.geteuid() != 0:
        path.write_text("secret")
        path.chmod(0)
    elif Path("/proc/self/mem").exists():
        path.symlink_to("/proc/self/mem")
    else:
        pytest.skip("no way to make an unreadable file here")


def _corpus(root: Path) -> Path:
    root.mkdir()
    (root / "good.txt").write_text("Bees dance.")
    (root / "dangling.txt").symlink_to(root / "missing-target.txt")
    (root / "loop.txt").symlink_to(root / "loop.txt")
    os.mkfifo(root / "pipe.txt")  # reading it would block forever
    _unreadable(root / "unreadable.txt")
    (root / "latin1.md").write_bytes("café".encode("latin-1"))
    (root / "utf16.txt").write_bytes("Hello, bees.".encode("utf-16-le"))  # no BOM: valid UTF-8 bytes
    (root / "zeros.txt").write_bytes(b"\x00" * 5000)
    (root / "mixed.jsonl").write_text('{"text": "fine"}\n{oops\n{"text": "also fine"}\n')
    return root


def test_bad_files_are_skipped_with_their_reasons(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "corpus")
    skipped: list[SkippedFile] = []
    docs = list(read_paths([root], skipped=skipped))
    assert sorted(d.text for d in docs) == ["Bees dance.", "also fine", "fine"]
    reasons = {Path(s.path).name + (f":{s.line}" if s.line else ""): s.reason for s in skipped}
    assert reasons.keys() == {
        "dangling.txt",
        "latin1.md",
        "loop.txt",
        "mixed.jsonl:2",
        "pipe.txt",
        "unreadable.txt",
        "utf16.txt",
        "zeros.txt",
    }
    assert "broken symlink" in reasons["dangling.txt"]
    assert "symlink loop" in reasons["loop.txt"]
    assert reasons["pipe.txt"] == "not a regular file (FIFO)"
    assert reasons["unreadable.txt"].startswith(("cannot read", "Permission denied"))
    assert reasons["latin1.md"].startswith("not UTF-8 text (") and "save it as UTF-8" in reasons["latin1.md"]
    # NUL is valid UTF-8 but in no text file: UTF-16 text and binary data are left out, not embedded
    unmarked = "binary, or UTF-16 without its byte-order mark"
    assert reasons["utf16.txt"] == f"not UTF-8 text (a NUL byte at 1: {unmarked})"
    assert reasons["zeros.txt"] == f"not UTF-8 text (a NUL byte at 0: {unmarked})"
    assert "not valid JSON" in reasons["mixed.jsonl:2"]
    assert str(skipped[0]).startswith(str(root))  # "path: reason" lines name the file


def test_without_a_skip_list_the_first_bad_file_raises_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    os.mkfifo(root / "a-pipe.txt")  # skipped even so: it is not a file to read
    (root / "b-dangling.txt").symlink_to(root / "nowhere")
    with pytest.raises(InvalidInputError, match=r"b-dangling\.txt: broken symlink"):
        list(read_paths([root]))
    with pytest.raises(InvalidInputError, match=r"b-dangling\.txt: broken symlink"):
        list(read_paths([root / "b-dangling.txt"]))


def test_a_repeated_jsonl_id_skips_that_record_not_the_folder(tmp_path: Path) -> None:
    """Seen from outside: two records with one ``id`` stopped the whole run, and no file was stored."""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "notes.txt").write_text("Bees dance.")
    (root / "faq.jsonl").write_text(
        '{"id": "a", "text": "first"}\n{"id": "b", "text": "other"}\n{"id": "a", "text": "again"}\n'
    )
    skipped: list[SkippedFile] = []
    docs = list(read_paths([root], skipped=skipped))
    assert sorted(d.text for d in docs) == ["Bees dance.", "first", "other"]  # the first record wins
    (left_out,) = skipped
    assert (Path(left_out.path).name, left_out.line) == ("faq.jsonl", 3)
    assert left_out.reason == "id 'a' again (first on line 1)"


def test_a_record_without_an_id_never_collides_in_silence_with_an_id_that_is_a_line_number(
    tmp_path: Path,
) -> None:
    """A record without an id is named by its line: ``{"id": 3}`` on line 1 and an id-less record on
    line 3 would share a source. The later one is left out, saying so in words of its own."""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "faq.jsonl").write_text(
        '{"id": 3, "text": "first"}\n{"id": "b", "text": "other"}\n{"text": "third"}\n'
    )
    skipped: list[SkippedFile] = []
    docs = list(read_paths([root], skipped=skipped))
    assert sorted(d.text for d in docs) == ["first", "other"]
    (left_out,) = skipped
    assert left_out.line == 3
    assert left_out.reason == "no id, and its line number 3 is the id of line 1: give it an id"


def test_a_beir_corpus_record_is_named_by_its_underscore_id(tmp_path: Path) -> None:
    """``poolrag ingest corpus.jsonl`` names records as ``poolrag eval`` does: ``path#<_id>``."""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        '{"_id": "d7", "text": "first"}\n{"id": "x", "_id": "y", "text": "b"}\n'
    )
    docs = list(read_paths([root]))
    assert [d.source.rsplit("#", 1)[1] for d in docs] == ["d7", "x"]  # id wins where both are given


def test_one_folder_given_alone_is_read_as_that_folder(tmp_path: Path) -> None:
    """``read_paths("docs")``, not its characters (seen from outside: 'no such file or folder: d')."""
    from poolrag.ingest.readers import count_documents

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Bees dance.")
    for given in (str(tmp_path / "docs"), tmp_path / "docs"):
        assert [d.text for d in read_paths(given)] == ["Bees dance."]
        assert count_documents(given) == 1


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_text_file_with_a_byte_order_mark_is_read_in_its_encoding(tmp_path: Path, encoding: str) -> None:
    """Notepad's "Unicode" and PowerShell's ``>`` write UTF-16 with its mark (seen from outside:
    left out as 'not UTF-8 text (invalid start byte)'); the mark names the encoding for certain."""
    text = "Bees dance to show where the flowers are. Café, naïve, 蜂.\r\nSecond line."
    mark = {"utf-16-be": codecs.BOM_UTF16_BE}.get(encoding, b"")
    (tmp_path / "notes.txt").write_bytes(mark + text.encode(encoding))
    skipped: list = []
    (doc,) = list(read_paths(tmp_path, skipped=skipped))
    read = text.replace("\r\n", "\n")  # line ends as a UTF-8 file's are read
    assert skipped == [] and doc.text.lstrip("\ufeff") == read
    assert "".join(doc.pieces(size=8)).lstrip("\ufeff") == read


def test_excluded_files_and_folders_are_not_read_nor_counted(tmp_path: Path) -> None:
    """LangChain's DirectoryLoader(exclude=) and LlamaIndex's SimpleDirectoryReader(exclude=) leave
    out node_modules and drafts; patterns read as .gitignore reads them (seen from outside: no way
    to keep a vendored package's README out of the collection)."""
    from poolrag.ingest.readers import count_documents, excluded

    for name in [
        "a.md",
        "app.log.txt",
        "node_modules/pkg/README.md",
        "docs/node_modules.md",
        "drafts/2023/old.md",
        "drafts/keep.md",
        "sub/drafts/x.md",
        "sub/notes.txt",
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"Text of {name}.")
    patterns = ["node_modules/", "*.log.txt", "/drafts/2023"]
    read = sorted(
        Path(d.source).relative_to(tmp_path).as_posix() for d in read_paths(tmp_path, exclude=patterns)
    )
    assert read == ["a.md", "docs/node_modules.md", "drafts/keep.md", "sub/drafts/x.md", "sub/notes.txt"]
    assert count_documents(tmp_path, exclude=patterns) == len(read)
    assert excluded("x/node_modules/", ["node_modules"]) and not excluded(
        "node_modules.md", ["node_modules/"]
    )
    (named,) = read_paths(tmp_path / "node_modules" / "pkg" / "README.md", exclude=patterns)  # named: read
    assert named.source.endswith("README.md")


def test_a_skipped_file_is_named_with_its_control_characters_escaped(tmp_path: Path) -> None:
    """A file's name is the folder owner's text: printed raw in the "left out" lines, an ESC in it
    cleared the reader's terminal, and an undecodable byte could not be printed at all."""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a\x1b[2Jb.md").write_bytes("café".encode("latin-1"))
    (root / os.fsdecode(b"c\xff.md")).write_bytes("café".encode("latin-1"))
    skipped: list[SkippedFile] = []
    assert list(read_paths([root], skipped=skipped)) == []
    shown = sorted(str(s).rsplit("/", 1)[-1] for s in skipped)
    assert [line.split(":")[0] for line in shown] == ["a\\x1b[2Jb.md", "c\\udcff.md"]


@pytest.mark.parametrize("name", ["archive.txt", "photo.md"])
def test_a_binary_file_named_as_text_is_called_binary(tmp_path: Path, name: str) -> None:
    """A zip or a picture named ``.txt`` holds NUL bytes and bytes UTF-8 refuses; seen from outside,
    the refused byte was named first (``save it as UTF-8 (Latin-1 and Windows code pages are not
    guessed)``), as if saving a text again could mend it."""
    (tmp_path / name).write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00\xb7\x8a" + bytes(range(256)) * 8)
    skipped: list[SkippedFile] = []
    assert list(read_paths(tmp_path, skipped=skipped)) == []
    unmarked = "binary, or UTF-16 without its byte-order mark"
    assert [s.reason for s in skipped] == [f"not UTF-8 text (a NUL byte at 5: {unmarked})"]
