"""Issue 13, item 2 (CLI): every user error is one line naming the file or name, exit 2 (3 stays for
a database that is down); files that cannot be read are skipped and listed, or stop the run with
--fail-fast; retries log one line each and no traceback."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from poolrag.cli import main

ROOT = Path(__file__).resolve().parents[2]
MUSIC = ROOT / "samples" / "music"
READ_ONLY = Path("/sys")  # sysfs refuses new files even to root
needs_sysfs = pytest.mark.skipif(not (READ_ONLY / "kernel").is_dir(), reason="needs Linux sysfs")


def _one_line_error(err: str, *fragments: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("poolrag "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _store(tmp_path: Path) -> list[str]:
    return ["--store", "qdrant", "--path", str(tmp_path / "q"), "--cache", str(tmp_path / "c.sqlite")]


def _bad_corpus(root: Path) -> Path:
    root.mkdir()
    shutil.copy(MUSIC / next(p.name for p in MUSIC.iterdir() if p.suffix == ".md"), root / "good.md")
    (root / "dangling.txt").symlink_to(root / "gone.txt")
    (root / "loop.txt").symlink_to(root / "loop.txt")
    os.mkfifo(root / "fifo.txt")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    return root


def test_prune_keeps_the_skipped_files_a_symlink_loop_among_them(tmp_path: Path, capsys) -> None:
    corpus = _bad_corpus(tmp_path / "corpus")
    args = ["ingest", str(corpus), *_store(tmp_path), "--collection", "c", "--quiet", "--json", "--prune"]
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["left_out"] == 4


def test_bad_files_are_skipped_and_summarised_at_the_end(tmp_path: Path, capsys) -> None:
    corpus = _bad_corpus(tmp_path / "corpus")
    code = main(["ingest", str(corpus), *_store(tmp_path), "--collection", "c", "--quiet", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert report["documents"] == 1 and report["upserted"] > 0
    assert len(report["skipped"]) == report["left_out"] == 4  # a count a nightly job's monitor reads
    assert report["documents_skipped"] == 0  # documents a resumed run found done: none here
    assert "Traceback" not in captured.err
    summary = captured.err[captured.err.index("4 left out:") :].splitlines()
    assert [line.split(": ", 1)[0].strip().rsplit("/", 1)[-1] for line in summary[1:]] == sorted(
        ["dangling.txt", "fifo.txt", "latin1.txt", "loop.txt"]
    )


def test_fail_fast_stops_at_the_first_bad_file(tmp_path: Path, capsys) -> None:
    corpus = _bad_corpus(tmp_path / "corpus")
    code = main(["ingest", str(corpus), *_store(tmp_path), "--collection", "c", "--quiet", "--fail-fast"])
    assert code == 2
    _one_line_error(capsys.readouterr().err, "dangling.txt", "broken symlink")


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("faq.csv", "id,question,answer\n1,Who runs payroll?,Finance\n2,a,b,c\n", "3: 4 cells in a row"),
        ("faq.jsonl", '{"id": "a", "text": "Tides."}\n{"id": "a", "text": "Bread."}\n', "2: id 'a' again"),
    ],
)
def test_fail_fast_names_a_bad_record_by_its_file_and_line_once(
    name: str, content: str, said: str, tmp_path: Path, capsys
) -> None:
    """Seen from outside: 'poolrag ingest: error: /data/faq.csv: /data/faq.csv:3: 4 cells...', the
    file named twice, the second time with the line."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / name).write_text(content)
    code = main(["ingest", str(corpus), *_store(tmp_path), "--collection", "c", "--quiet", "--fail-fast"])
    assert code == 2
    err = capsys.readouterr().err
    _one_line_error(err, f"poolrag ingest: error: {corpus / name}:{said}")
    assert err.count(name) == 1, err


@pytest.mark.parametrize("name", ["../../escape", "a/b", "", "x" * 300])
@pytest.mark.parametrize("command", ["ingest", "search"])
def test_invalid_collection_names_exit_2_before_any_work(
    command: str, name: str, tmp_path: Path, capsys
) -> None:
    first = str(MUSIC) if command == "ingest" else "query"
    started = time.monotonic()
    assert main([command, first, *_store(tmp_path), "--collection", name]) == 2
    _one_line_error(capsys.readouterr().err, "collection name")
    assert time.monotonic() - started < 5  # no model was loaded
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize(
    ("store", "location", "data"),
    [
        ("milvus", ["--uri", "{tmp}/typo.db"], "typo.db"),
        ("qdrant", ["--path", "{tmp}/typo"], "typo"),
        ("qdrant-edge", ["--path", "{tmp}/typo"], "typo"),  # the database is the --path folder
    ],
)
def test_a_search_of_a_database_that_is_not_there_creates_none(
    store: str, location: list[str], data: str, tmp_path: Path, capsys
) -> None:
    """Seen from outside: a mistyped ``--uri`` made ``poolrag search`` create an empty database, then
    report the collection missing. Now it names the path and the ingest that would fill it."""
    where = [arg.format(tmp=tmp_path) for arg in location]
    assert main(["search", "sourdough", "--store", store, *where, "--collection", "docs"]) == 2
    _one_line_error(capsys.readouterr().err, f"no {store} database at {tmp_path / data}", "poolrag ingest")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("store", "said"), [("qdrant", "--path poolrag_qdrant"), ("qdrant-edge", "--path poolrag_edge")]
)
def test_the_ingest_a_missing_default_database_suggests_fills_the_same_place(
    store: str, said: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["search", "sourdough", "--store", store, "--collection", "docs"]) == 2
    _one_line_error(capsys.readouterr().err, f"--store {store} {said} --collection docs")


@needs_sysfs
@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [
        ("--cache", "/sys/poolrag/c.sqlite", "/sys/poolrag/c.sqlite"),
        ("--checkpoint", "/sys/poolrag/ck.json", "/sys/poolrag/ck.json"),
        ("--path", "/sys/poolrag_q", "/sys/poolrag_q"),
        ("--uri", "/sys/poolrag_m.db", "/sys"),
    ],
)
def test_unwritable_locations_exit_2_naming_the_path(
    option: str, value: str, fragment: str, tmp_path: Path, capsys
) -> None:
    store = ["--store", "milvus"] if option == "--uri" else ["--store", "qdrant"]
    if option != "--path" and option != "--uri":
        store += ["--path", str(tmp_path / "q")]
    args = ["ingest", str(MUSIC), *store, option, value, "--quiet"]
    if option != "--cache":
        args += ["--cache", str(tmp_path / "c.sqlite")]
    started = time.monotonic()
    assert main(args) == 2
    _one_line_error(capsys.readouterr().err, fragment)
    assert time.monotonic() - started < 60  # at once: no retries


def test_a_folder_with_nothing_to_read_says_which_files_are_read(tmp_path: Path, capsys) -> None:
    """Seen from outside: a folder of PDFs "ingested 0 documents" and said nothing more (a text
    model now reads their text; a folder of pictures is what it has nothing to read in)."""
    folder = tmp_path / "pictures"
    folder.mkdir()
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert main(["ingest", str(folder), "--uri", str(tmp_path / "m.db"), "--no-cache", "--quiet"]) == 0
    err = capsys.readouterr().err
    kinds = ".txt, .md, .markdown, .rst, .jsonl, .csv, .html, .htm, .docx, .pptx, .pdf"
    assert f"no documents in {folder}: poolrag reads {kinds} files" in err
    assert "with a model that reads images such as CLIP, images;" in err


def test_empty_text_files_are_named_and_a_run_storing_nothing_says_so(tmp_path: Path, capsys, caplog) -> None:
    """Seen from outside: a folder of empty files said "up to date ... 0 chunks already stored" on a
    brand-new collection, and named none of them."""
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("")
    (folder / "todo.md").write_text("\n \u200b\n")
    assert main(["ingest", str(folder), "--uri", str(tmp_path / "m.db"), "--no-cache", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nothing to store: 2 documents with no text in milvus collection"), out
    for name in ("notes.txt", "todo.md"):
        assert f"{name} has no text (empty, or only whitespace): it adds no chunks" in caplog.text


def test_empty_and_header_only_sheets_are_named_not_called_unreadable(tmp_path: Path, capsys, caplog) -> None:
    """Seen from outside: ``ingest empty.csv header.csv`` said "no documents in ...: poolrag reads
    ... .csv ... save other documents as one of these first", and inside a folder said nothing."""
    folder = tmp_path / "sheets"
    folder.mkdir()
    (folder / "empty.csv").write_text("")
    (folder / "header.csv").write_text("question,answer\n")
    (folder / "blank.jsonl").write_text("\n")
    for paths in ([str(folder / "empty.csv"), str(folder / "header.csv")], [str(folder)]):
        caplog.clear()
        args = ["ingest", *paths, "--uri", str(tmp_path / "m.db"), "--no-cache", "--quiet"]
        assert main(args) == 0
        out, err = capsys.readouterr()
        assert "no documents in" not in err and "save other documents" not in err, err
        assert out.startswith("nothing to store: "), out
        for name in ("empty.csv", "header.csv"):
            assert f"{name} has no rows (empty, or a header only): it adds no chunks" in caplog.text
    assert "blank.jsonl has no records (empty, or only blank lines): it adds no chunks" in caplog.text


def test_a_reader_that_leaves_stops_the_command_quietly(tmp_path: Path) -> None:
    """``poolrag search ... | head``: the rest of the output met a closed pipe, and a
    BrokenPipeError traceback ended the command."""
    where = ["--uri", str(tmp_path / "m.db")]
    assert main(["ingest", str(MUSIC), *where, "--no-cache", "--quiet"]) == 0
    ran = subprocess.Popen(
        [sys.executable, "-m", "poolrag.cli", "search", "guitar", *where, "-k", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert ran.stdout is not None and ran.stderr is not None
    ran.stdout.close()  # the reader has gone before the first line
    err = ran.stderr.read().decode()
    assert ran.wait(120) == 141 and err == "", err


def test_output_onto_a_full_disk_is_one_line(tmp_path: Path) -> None:
    """``poolrag search --json > /dev/full`` ended in an OSError traceback."""
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is Linux's always-full device; this platform has none")
    where = ["--uri", str(tmp_path / "m.db")]
    assert main(["ingest", str(MUSIC), *where, "--no-cache", "--quiet"]) == 0
    with open("/dev/full", "w") as full:
        ran = subprocess.run(
            [sys.executable, "-m", "poolrag.cli", "search", "guitar", *where, "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert ran.returncode == 4, ran.stderr
    assert ran.stderr == "poolrag: error: cannot write the output: No space left on device\n", ran.stderr


def test_version_names_the_package(capsys) -> None:
    from poolrag import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"poolrag {__version__}\n"


def test_a_pdf_that_cannot_be_read_is_one_line_and_the_run_goes_on(tmp_path: Path, capsys) -> None:
    pytest.importorskip("pypdfium2", reason="a PDF's text needs the pdf extra (pypdfium2)")
    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "report.pdf").write_bytes(b"%PDF-1.7")
    assert main(["ingest", str(folder), "--uri", str(tmp_path / "m.db"), "--no-cache", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"1 left out:\n  {(folder / 'report.pdf').resolve()}: not a readable PDF" in err, err


def test_a_milvus_file_under_a_file_says_that_file_is_no_folder(tmp_path: Path, capsys) -> None:
    """Seen from outside: ``--uri notes.txt/x.db`` said the folder ``notes.txt`` "does not exist"."""
    (tmp_path / "notes.txt").write_text("a file")
    database = tmp_path / "notes.txt" / "x.db"
    assert main(["ingest", str(MUSIC), "--uri", str(database), "--no-cache", "--quiet"]) == 2
    _one_line_error(capsys.readouterr().err, f"{tmp_path / 'notes.txt'} is a file, not a folder")
    qdrant = ["--store", "qdrant", "--path", str(tmp_path / "notes.txt" / "q")]
    assert main(["ingest", str(MUSIC), *qdrant, "--no-cache", "--quiet"]) == 2
    _one_line_error(capsys.readouterr().err, "part of that path is a file, not a folder")


@pytest.fixture
def forged_model(tmp_path: Path, minilm_path: Path) -> Path:
    """A model folder whose pytorch_model.bin is a pickle that would run a command when loaded."""
    import transformers

    folder = tmp_path / "forged"
    folder.mkdir()
    transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37
    ).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (minilm_path / name).exists():
            shutil.copy(minilm_path / name, folder / name)

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": Payload()}))
    return folder


def test_a_forged_weights_file_is_one_line_naming_it(forged_model: Path, tmp_path: Path, capsys) -> None:
    code = main(["ingest", str(MUSIC), *_store(tmp_path), "--model", str(forged_model), "--quiet"])
    assert code == 2
    _one_line_error(capsys.readouterr().err, str(forged_model / "pytorch_model.bin"))
    assert not (tmp_path / "pwned").exists()


def test_serve_reports_a_forged_weights_file_with_exit_2(forged_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "poolrag.cli",
            "serve",
            str(forged_model),
            "--port",
            "0",
            "--log-level",
            "error",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert f"cannot start: refusing to load {forged_model / 'pytorch_model.bin'}" in out.stderr
    assert not (tmp_path / "pwned").exists()


def test_a_run_that_succeeds_after_retries_logs_one_line_per_retry(tmp_path: Path) -> None:
    """Another process holds the Qdrant local folder until the run has retried; the run then succeeds.

    The holder lets go when the first retry line appears (not after a fixed time), so a slow model
    load on a busy machine cannot let the run reach the store after the folder was already free."""
    folder = tmp_path / "q"
    release = tmp_path / "release"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom qdrant_client import QdrantClient\n"
            f"c = QdrantClient(path={str(folder)!r})\nprint('held', flush=True)\n"
            "deadline = time.monotonic() + 600\n"
            f"while not Path({str(release)!r}).exists() and time.monotonic() < deadline:\n"
            "    time.sleep(0.1)\nc.close()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "poolrag.cli",
            "ingest",
            str(MUSIC),
            "--store",
            "qdrant",
            "--path",
            str(folder),
            "--retries",
            "8",
            "--retry-delay",
            "0.5",
            "--quiet",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert run.stderr is not None
    lines: list[str] = []
    for line in run.stderr:
        lines.append(line.rstrip("\n"))
        if "retry " in line:
            release.touch()
    release.touch()
    code = run.wait(timeout=600)
    holder.wait(timeout=30)
    err = "\n".join(lines)
    assert code == 0, err[-3000:]
    retries = [line for line in lines if "retry " in line]
    assert retries and "Traceback" not in err
    assert all(line.startswith("WARNING poolrag.stores.retry:") for line in retries)


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (
            ["search", "-k", "-5", "q"],
            ["poolrag search: error:", "argument -k", "must be at least 1, got -5"],
        ),
        (["search"], ["poolrag search: error:", "query"]),
        (
            ["ingest", "x", "--cache-max-gb", "0"],
            ["poolrag ingest: error:", "--cache-max-gb", "must be a number above 0, got 0"],
        ),
        (["search", "q", "--cache-max-gb", "nan"], ["poolrag search: error:", "--cache-max-gb", "got nan"]),
        (["ingest", "x", "--retry-delay", "-1"], ["poolrag ingest: error:", "--retry-delay", "at least 0"]),
        (["serve", "m", "--body-timeout", "inf"], ["poolrag serve: error:", "--body-timeout", "above 0"]),
        (["ingest"], ["poolrag ingest: error:", "PATH"]),
        (["ingest", "x", "--chunk-tokens", "many"], ["poolrag ingest: error:", "--chunk-tokens"]),
        (["eval"], ["poolrag eval: error:", "DATASET"]),
        (["eval", "d", "-k", "0"], ["poolrag eval: error:", "argument -k"]),
        (["eval", "d", "--rerank-weight", "2"], ["poolrag eval: error:", "--rerank-weight", "from 0 to 1"]),
        (["eval", "d", "--rerank-weight", "nan"], ["poolrag eval: error:", "--rerank-weight", "got nan"]),
        (
            ["ingest", "x", "--cpu-fast-mode-min-cosine", "nan"],
            ["poolrag ingest: error:", "--cpu-fast-mode-min-cosine", "from 0 to 1, got nan"],
        ),
        (["serve", "m", "--port", "x"], ["poolrag serve: error:", "--port", "'x'"]),
        (["serve", "m", "--port", "99999"], ["poolrag serve: error:", "--port", "0 to 65535, not 99999"]),
        (["serve", "m", "--port", "-1"], ["poolrag serve: error:", "--port", "not -1"]),
        # the subcommand's own help lists its flags; the top one lists only the commands
        (
            ["serve", "m", "--bogus"],
            ["poolrag serve: error:", "unrecognized arguments: --bogus", "serve --help"],
        ),
        (
            ["ingest", "x", "--bogus", "1"],
            ["poolrag ingest: error:", "arguments: --bogus 1", "ingest --help"],
        ),
        ([], ["poolrag: error:", "COMMAND"]),
        (["frob"], ["poolrag: error:", "'frob'"]),
    ],
    ids=lambda value: (
        " ".join(value) if isinstance(value, list) and value and "error:" not in value[0] else None
    ),
)
def test_a_usage_mistake_is_one_line_naming_the_option(argv: list[str], fragments: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert "usage:" not in captured.err and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "--help'" in lines[0], captured.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("extra", "refusal"),
    [
        (["--ray-workers", "4"], "--ray-workers goes with --ray"),
        (["--analyzer", "words"], "--analyzer words goes with --hybrid"),
        (["--language", "french", "--sparse-model", "x"], "--sparse-model, --language go with --hybrid"),
    ],
)
def test_ingest_refuses_a_flag_of_a_mode_not_asked_for(
    extra: list[str], refusal: str, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """Each was taken and dropped: the run was local and dense, with no Ray actors and no analyzer
    or language recorded, and said nothing of it (``--sparse-model`` alone was refused)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Cats purr when they are content.")
    assert main(["ingest", str(docs), "--model", str(minilm_path), *_store(tmp_path), "-q", *extra]) == 2
    _one_line_error(capsys.readouterr().err, refusal)
    assert not (tmp_path / "q").exists()  # refused before the store was made


def test_search_refuses_a_sparse_model_for_a_dense_search(tmp_path: Path, minilm_path: Path, capsys) -> None:
    """``--sparse-model`` picks the sparse leg's model: a dense search ran without it and said
    nothing, as ``--prefetch`` without ``--hybrid`` is refused."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Cats purr when they are content.")
    common = ["--model", str(minilm_path), *_store(tmp_path), "-q"]
    assert main(["ingest", str(docs), *common]) == 0
    capsys.readouterr()
    assert main(["search", "cats", "--sparse-model", str(minilm_path), *common]) == 2
    _one_line_error(capsys.readouterr().err, "--sparse-model", "--mode sparse or --hybrid")
