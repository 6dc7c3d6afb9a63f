"""``poolrag ingest`` and ``poolrag search``: the README's first two commands, and their errors."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.cli import main
from poolrag.config.model_spec import load_model_spec
from poolrag.core.model_setup import fingerprints
from poolrag.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def _poolrag(args: list[str], cwd: Path, **environ: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(cwd / "cache"), **environ}
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_readme_commands_ingest_the_samples_then_search_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """In this process, from the folder the commands run in (the first_hour sessions run them as
    written, each in a process of its own)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    n_docs = sum(1 for p in SAMPLES.rglob("*") if p.suffix in (".md", ".txt"))
    assert main(["ingest", str(SAMPLES), "--store", "milvus", "--collection", "samples"]) == 0
    assert f"ingested {n_docs} documents into milvus collection 'samples'" in capsys.readouterr().out
    assert (tmp_path / "poolrag_milvus.db").is_dir()

    code = main(
        [
            "search",
            "how do bees tell each other where flowers are",
            "--store",
            "milvus",
            "--collection",
            "samples",
            "-k",
            "3",
            "--json",
        ]
    )
    assert code == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rank"] for r in results] == [1, 2, 3]
    assert results[0]["source"].endswith("nature/honeybees.md") and "waggle dance" in results[0]["text"]


def test_truncating_a_non_matryoshka_default_model_is_a_clear_error(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "ingest",
            str(SAMPLES / "music"),
            "--uri",
            str(tmp_path / "m.db"),
            "--dimensions",
            "64",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--quiet",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "not a Matryoshka model" in err and "--assume-matryoshka" in err
    assert err.count("trained for it") == 1 and "hf_overrides" not in err  # the CLI's own words, once
    assert not (tmp_path / "m.db").exists()  # refused before the database was touched


def test_dimensions_on_a_colbert_model_names_the_real_cause(tmp_path: Path, assets: Path, capsys) -> None:
    """Not the Matryoshka hint: ColBERT token vectors take no dimensions at all."""
    argv = ["ingest", str(SAMPLES / "music"), "--model", str(assets / "colbert-pylate"), "--dimensions", "64"]
    code = main([*argv, "--uri", str(tmp_path / "m.db"), "--cache", str(tmp_path / "c.sqlite"), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--dimensions 64: a ColBERT collection stores the model's token vectors whole" in err
    assert "--assume-matryoshka" not in err


def test_database_down_exits_3_with_the_reason(tmp_path: Path, capsys) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main(
        [
            "ingest",
            str(SAMPLES / "music"),
            "--store",
            "qdrant",
            "--url",
            f"http://127.0.0.1:{port}",
            "--retries",
            "2",
            "--retry-delay",
            "0.01",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--quiet",
        ]
    )
    assert code == 3
    assert "is unavailable" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "--store", "qdrant", "--collection", "none"], "nothing was ingested there"),
        (["ingest", "no/such/folder"], "no such file or folder"),
        (["search", "x", "--store", "milvus", "--path", "p"], "milvus takes --uri"),
        (["search", "x", "--prefetch", "5"], "a hybrid search's legs: add --hybrid"),
    ],
)
def test_bad_requests_exit_2_with_a_message(
    args: list[str], message: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "ours"), [("--chunk-size", "--chunk-tokens"), ("--chunk-overlap", "--overlap")]
)
def test_langchains_splitter_flags_name_the_token_flags(flag: str, ours: str, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["ingest", "docs", flag, "500"])
    assert stopped.value.code == 2
    assert f"{flag}: poolrag counts chunks in the model's tokens: use {ours} N" in capsys.readouterr().err


def test_search_finds_the_model_when_the_ingest_folder_is_gone(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A collection copied from another machine records a model folder that is not here; search
    falls back to the default model, and the weights fingerprint confirms it is the same one."""
    import shutil

    copy = tmp_path / "elsewhere" / "minilm"
    shutil.copytree(minilm_path, copy)
    common = ["--uri", str(tmp_path / "m.db"), "--collection", "c", "--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(SAMPLES / "nature"), "--model", str(copy), "--quiet", *common]) == 0
    shutil.rmtree(copy)
    capsys.readouterr()
    assert main(["search", "why do corals turn white", "-k", "1", "--json", *common]) == 0
    assert json.loads(capsys.readouterr().out)["source"].endswith("nature/coral-reefs.md")


def test_quiet_shows_no_progress_bar_even_while_the_first_load_tunes(tmp_path: Path) -> None:
    """A fresh cache folder: the first load times the transformers modules too (in the background,
    so the run may end first), whose weight loading draws a bar unless told not to; the
    transformers modules pinned load here in any case."""
    (tmp_path / "a.md").write_text("Bees dance to say where the flowers are.")
    args = ["ingest", str(tmp_path / "a.md"), "--store", "qdrant", "--path", str(tmp_path / "q"), "-q"]
    args += ["--model-impl", "transformers"]
    ingest = _poolrag(args, tmp_path, POOLRAG_TUNE="auto")  # the suite's default is off
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    assert "Loading weights" not in ingest.stderr and "it/s]" not in ingest.stderr, ingest.stderr[-2000:]


def test_a_search_that_ends_while_its_first_load_measures_exits_cleanly(tmp_path: Path) -> None:
    """Each search is a first load (an empty poolrag cache, tuning at its default) that ends while
    the background measurement is running: it stops after its step in flight instead of leaving a
    thread inside torch as the process tears down (that aborted: exit 134, "terminate called
    without an active exception", about one search in three here), and says nothing of a step
    that the shutdown itself stopped."""
    (tmp_path / "a.md").write_text("Sourdough starters need regular feedings of flour and water.")
    store = ["--uri", str(tmp_path / "m.db"), "--collection", "demo"]
    ingest = _poolrag(["ingest", str(tmp_path / "a.md"), *store, "-q"], tmp_path)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    for run in range(4):
        first_load = {"POOLRAG_CACHE_DIR": str(tmp_path / f"cache-{run}"), "POOLRAG_TUNE": "auto"}
        quiet = ["-q"] if run % 2 else []  # -q hides the line saying the first load measures
        search = _poolrag(["search", "sourdough", *store, *quiet], tmp_path, **first_load)
        assert search.returncode == 0, (run, search.returncode, search.stderr[-3000:])
        assert "terminate called" not in search.stderr and "a.md" in search.stdout
        assert "measuring this model's paths failed" not in search.stderr  # the exit is no failure
        assert ("no speed verdict for this model on this machine yet" in search.stderr) is not bool(quiet), (
            search.stderr
        )


def test_a_rerun_without_the_truncation_a_collection_was_written_with_names_its_flags(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """Seen from outside: the refusal read as a clash of two models (the same folder, its identity
    with and without the Matryoshka assumption) and told the user to delete the collection."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.txt").write_text("Coral reefs bleach when the water warms.")
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--collection", "c", "--no-cache", "-q"]
    line = ["ingest", str(tmp_path / "docs"), "--model", str(minilm_path), *store]
    assert main([*line, "--dimensions", "128", "--assume-matryoshka"]) == 0
    capsys.readouterr()
    assert main(line) == 2
    error = capsys.readouterr().err
    assert "it was written with --dimensions 128 --assume-matryoshka, so run again with them" in error
    assert main([*line, "--dimensions", "128", "--assume-matryoshka"]) == 0


def _in_qdrant(model: Path, path: Path, collection: str) -> list[str]:
    """The flags of a run on ``model`` into a Qdrant local collection."""
    return ["--model", str(model), "--store", "qdrant", "--path", str(path), "--collection", collection]


def test_a_search_that_finds_nothing_says_so(tmp_path: Path, minilm_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    store = _in_qdrant(minilm_path, tmp_path / "q", "c")
    assert main(["ingest", str(tmp_path / "empty"), *store, "--no-cache", "-q"]) == 0
    capsys.readouterr()
    assert main(["search", "anything", *store, "--json"]) == 0
    found = capsys.readouterr()
    assert found.out == ""  # --json: no result lines
    assert "no results: collection 'c' is empty" in found.err


def test_prune_over_an_emptied_folder_refuses_and_keeps_the_collection(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A nightly ``--prune`` over a share that is not mounted (its mount point an empty folder):
    exit 2 naming why, the collection as it was (seen from outside: '3 deleted', exit 0)."""
    share = tmp_path / "share"
    share.mkdir()
    (share / "one.txt").write_text("Coral reefs bleach when the water warms.")
    store = _in_qdrant(minilm_path, tmp_path / "q", "c")
    assert main(["ingest", str(share), *store, "--no-cache", "-q"]) == 0
    (share / "one.txt").unlink()
    capsys.readouterr()
    assert main(["ingest", str(share), *store, "--no-cache", "-q", "--prune"]) == 2
    assert "--prune would delete every chunk of c: nothing was deleted" in capsys.readouterr().err
    assert main(["search", "coral", *store, "--json"]) == 0
    assert "one.txt" in capsys.readouterr().out


def test_exclude_leaves_a_folder_out_and_prune_removes_what_it_stored(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    docs = tmp_path / "docs"
    (docs / "node_modules" / "pkg").mkdir(parents=True)
    (docs / "guide.md").write_text("Deploys run every night at two.")
    (docs / "node_modules" / "pkg" / "README.md").write_text("A vendored package's readme about parsers.")
    store = _in_qdrant(minilm_path, tmp_path / "q", "c")
    assert main(["ingest", str(docs), *store, "--no-cache", "-q", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 2
    assert (
        main(
            [
                "ingest",
                str(docs),
                *store,
                "--no-cache",
                "-q",
                "--json",
                "--exclude",
                "node_modules",
                "--prune",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["documents"] == 1 and report["deleted"] == 1
    assert main(["search", "parsers", *store, "--json"]) == 0
    assert "node_modules" not in capsys.readouterr().out


def test_the_report_counts_one_document_and_one_chunk_in_the_singular(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.txt").write_text("Coral reefs bleach when the water warms.")
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--collection", "one", "--no-cache", "-q"]
    assert main(["ingest", str(tmp_path / "docs"), "--model", str(minilm_path), *store]) == 0
    out = capsys.readouterr().out
    assert "ingested 1 document into qdrant collection 'one': 1 chunk: 1 embedded now" in out
    where = f"; in {(tmp_path / 'q').resolve()}\n"  # where the data went, the default location too
    assert out.endswith(where)
    assert main(["ingest", str(tmp_path / "docs"), "--model", str(minilm_path), *store]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "up to date: 1 document in qdrant collection 'one', 1 chunk already stored; "
        "nothing embedded or deleted"
    )
    assert out.endswith(where)


def test_without_a_cache_a_repeated_chunk_is_not_said_to_come_from_it(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """--no-cache stores nothing, so a chunk identical to another is embedded once and named so
    (seen from outside: it was counted 'taken from cache')."""
    (tmp_path / "docs").mkdir()
    for name in ("a.txt", "b.txt"):
        (tmp_path / "docs" / name).write_text("Coral reefs bleach when the water warms.")
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--collection", "two", "--no-cache", "-q"]
    assert main(["ingest", str(tmp_path / "docs"), "--model", str(minilm_path), *store]) == 0
    out = capsys.readouterr().out
    assert "2 chunks: 1 embedded now, 1 identical to another chunk, 0 already stored" in out, out


def test_a_text_model_reads_pdfs_web_pages_office_files_and_sheets_and_says_what_it_did_not_read(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A folder of notes, PDFs, saved web pages, Word documents, a PowerPoint deck, a CSV sheet and
    photographs, as a RAG user has: a text model reads the PDFs' text layer and search names the
    page (seen from outside: the PDFs vanished, 'not read: this model reads text'), a page's visible
    text, not its markup, a Word document's paragraphs, a deck's slides (search names the slide;
    seen from outside: 'geology.pptx page 2') and each row of the sheet; the photographs are not
    listed, and one line says so."""
    pytest.importorskip("pypdfium2", reason="a PDF's text needs the pdf extra (pypdfium2)")
    pytest.importorskip("matplotlib", reason="the PDF is written by matplotlib (test extra)")
    docx = pytest.importorskip("docx", reason="the Word document is written by python-docx (test extra)")
    pptx = pytest.importorskip("pptx", reason="the deck is written by python-pptx (test extra)")
    from poolrag.testing.page_corpus import copy_photo, write_pdf

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "note.txt").write_text("Coral reefs bleach when the water warms.")
    pages = ["Sourdough needs a starter fed with flour.", "Glaciers carve valleys as they move."]
    write_pdf(tmp_path / "docs" / "report.pdf", pages)
    copy_photo(tmp_path / "docs" / "photo.jpg")
    page = "<html><head><title>Tides</title><script>track()</script></head><body><nav>Home</nav>"
    page += "<p>The moon's pull raises the tides.</p></body></html>"
    (tmp_path / "docs" / "tides.html").write_text(page)
    minutes = docx.Document()
    minutes.add_paragraph("The council voted to repair the old stone bridge in spring.")
    minutes.save(tmp_path / "docs" / "minutes.docx")
    deck = pptx.Presentation()
    agenda = "Agenda for the spring term: field trips and the museum visit."  # one chunk of 16 tokens
    for title in (agenda, "Volcanoes erupt when magma pressure exceeds the strength of the crust."):
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = title
    deck.save(tmp_path / "docs" / "geology.pptx")
    faq = "id,question,answer\nf1,When is the library open?,From nine to five on weekdays\n"
    (tmp_path / "docs" / "faq.csv").write_text(faq + "f2,Can I bring my dog?,Only guide dogs\n")
    model = ["--model", str(minilm_path)]
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--collection", "mixed"]
    ingest = ["ingest", str(tmp_path / "docs"), *model, *store, "--chunk-tokens", "16", "--no-cache", "-q"]
    assert main(ingest) == 0
    captured = capsys.readouterr()
    assert "ingested 7 documents" in captured.out, captured.out
    assert "1 image file not read: this model reads text (CLIP or ColPali read them)" in captured.err
    # a text file named on its own: no word about images (seen from outside: '1 image file not read')
    one = [
        "ingest",
        str(tmp_path / "docs" / "faq.csv"),
        *model,
        "--store",
        "qdrant",
        "--path",
        str(tmp_path / "q1"),
    ]
    assert main([*one, "--collection", "one", "--no-cache", "-q"]) == 0
    assert "not read" not in capsys.readouterr().err
    assert main(["search", "how do glaciers shape valleys", *model, *store, "-k", "1"]) == 0
    assert f"{(tmp_path / 'docs' / 'report.pdf').resolve()} page 2" in capsys.readouterr().out
    assert main(["search", "why does the sea rise and fall", *model, *store, "-k", "1"]) == 0
    found = capsys.readouterr().out
    assert str((tmp_path / "docs" / "tides.html").resolve()) in found, found
    assert "The moon's pull raises the tides." in found and "track()" not in found
    assert main(["search", "what did the town decide about the bridge", *model, *store, "-k", "1"]) == 0
    assert str((tmp_path / "docs" / "minutes.docx").resolve()) in capsys.readouterr().out
    assert main(["search", "opening hours of the library", *model, *store, "-k", "1"]) == 0
    found = capsys.readouterr().out
    assert f"{(tmp_path / 'docs' / 'faq.csv').resolve()}#f1" in found, found
    assert "answer: From nine to five on weekdays" in found
    assert main(["search", "why do volcanoes erupt", *model, *store, "-k", "1"]) == 0
    assert f"{(tmp_path / 'docs' / 'geology.pptx').resolve()} slide 2" in capsys.readouterr().out


def test_assume_matryoshka_reuses_the_cached_full_vectors(tmp_path: Path, minilm_path: Path, capsys) -> None:
    """The flag says which sizes may be cut; the full vectors are the same, so a collection of 128
    dimensions is cut from the cache another run filled (seen from outside: all embedded again)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.txt").write_text("Coral reefs bleach when the water warms.")
    common = ["ingest", str(tmp_path / "docs"), "--model", str(minilm_path), "--store", "qdrant"]
    common += ["--path", str(tmp_path / "q"), "--cache", str(tmp_path / "c.sqlite"), "-q"]
    assert main([*common, "--collection", "full"]) == 0
    assert "1 chunk: 1 embedded now" in capsys.readouterr().out
    assert main([*common, "--collection", "small", "--dimensions", "128", "--assume-matryoshka"]) == 0
    assert "1 chunk: 0 embedded now, 1 taken from cache" in capsys.readouterr().out


def test_search_json_carries_the_records_own_fields(tmp_path: Path, minilm_path: Path, capsys) -> None:
    """A JSONL record's url and title are what a RAG citation needs; --json printed neither."""
    record = {
        "id": "a1",
        "text": "Feed a sourdough starter daily with equal weights of flour and water.",
        "url": "https://example.com/starter",
        "title": "Starter care",
    }
    (tmp_path / "faq.jsonl").write_text(json.dumps(record) + "\n")
    store = _in_qdrant(minilm_path, tmp_path / "q", "c")
    assert main(["ingest", str(tmp_path / "faq.jsonl"), *store, "--no-cache", "-q"]) == 0
    capsys.readouterr()
    assert main(["search", "sourdough starter", *store, "--json", "--no-cache"]) == 0
    (hit,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hit["metadata"]["url"] == "https://example.com/starter"
    assert hit["metadata"]["title"] == "Starter care" and hit["source"].endswith("faq.jsonl#a1")


def test_no_auto_truncate_refuses_a_long_query_even_when_a_cut_vector_is_cached(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """A truncating search cached the long query's cut vector, and a later --no-auto-truncate
    search was answered from it instead of refusing the query."""
    store = [*_in_qdrant(minilm_path, tmp_path / "q", "c"), "--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(SAMPLES / "cooking"), *store, "-q"]) == 0
    long_query = "how do I keep a sourdough starter alive " * 60  # far past 256 tokens
    assert main(["search", long_query, *store, "-k", "1", "--json"]) == 0
    capsys.readouterr()
    assert main(["search", long_query, *store, "-k", "1", "--no-auto-truncate"]) == 2
    err = capsys.readouterr().err  # in the command's words: no Python argument to pass
    assert "more than the model's maximum of 256; shorten it, or drop --no-auto-truncate" in err, err
    assert "truncate_prompt_tokens" not in err


def test_a_missing_qdrant_edge_collection_is_named_as_the_other_stores_name_it(
    tmp_path: Path, capsys
) -> None:
    """Seen from outside: ``search --store qdrant-edge --path DB --collection nosuch`` said "no
    qdrant-edge database at DB/nosuch" while DB held other collections (Milvus and Qdrant say
    "collection 'nosuch' does not exist"); a --path that holds nothing is still "no database"."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Pelicans dive for fish.")
    database = tmp_path / "DB"
    edge = ["--store", "qdrant-edge", "--path", str(database), "--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(docs), *edge, "--collection", "docs", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["search", "fish", *edge, "--collection", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert f"collection 'nosuch' does not exist in qdrant-edge at {database}" in err, err
    assert "no qdrant-edge database" not in err
    elsewhere = ["--store", "qdrant-edge", "--path", str(tmp_path / "none"), "--collection", "docs"]
    assert main(["search", "fish", *elsewhere]) == 2
    assert (
        f"no qdrant-edge database at {tmp_path / 'none'}: nothing was ingested there"
        in capsys.readouterr().err
    )


def test_a_milvus_lite_database_searched_as_qdrant_is_no_qdrant_database_and_stays_as_it_was(
    tmp_path: Path, capsys
) -> None:
    """Seen from outside: ``search --store qdrant --path poolrag_milvus.db`` opened Qdrant's local
    mode there, which wrote its ``meta.json`` and lock file into the Milvus Lite folder, then said
    the collection did not exist. A folder Qdrant never wrote is no Qdrant database."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Pelicans dive for fish.")
    milvus = tmp_path / "poolrag_milvus.db"
    cache = ["--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(docs), "--uri", str(milvus), "--collection", "docs", "--quiet", *cache]) == 0
    before = sorted(p.relative_to(milvus) for p in milvus.rglob("*"))
    capsys.readouterr()
    as_qdrant = ["--store", "qdrant", "--path", str(milvus), "--collection", "docs"]
    assert main(["search", "fish", *as_qdrant, *cache]) == 2
    assert f"no qdrant database at {milvus}: nothing was ingested there" in capsys.readouterr().err
    assert sorted(p.relative_to(milvus) for p in milvus.rglob("*")) == before
    assert main(["search", "fish", "--uri", str(milvus), "--collection", "docs", "-k", "1", *cache]) == 0
    assert "a.txt" in capsys.readouterr().out


def test_a_matryoshka_collection_an_older_poolrag_wrote_is_still_its_model(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """Before 2026-11-28 the weights fingerprint hashed the config with ``--assume-matryoshka``'s
    declarations set, so a collection ingested then records another digest of the same files. The
    'old' collection is written here as that code did: its spec recorded with the fingerprint of
    the spec without ``weights_config`` (the old expression). Seen from outside: the upgraded
    ingest and search refused it as another model (exit 2) and told the user to delete it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "one.txt").write_text("Coral reefs bleach when the water warms.")
    common = ["--model", str(minilm_path), "--store", "qdrant", "--path", str(tmp_path / "q")]
    common += ["--no-cache", "-q"]
    sizes = ["--dimensions", "128", "--assume-matryoshka"]
    assert main(["ingest", str(tmp_path / "docs"), *common, "--collection", "today", *sizes]) == 0
    spec = load_model_spec(minilm_path, {"is_matryoshka": True}, False, None)
    older = fingerprints(dataclasses.replace(spec, weights_config=""))[0]
    assert older != fingerprints(spec)[0]  # the two digests the upgrade meets
    with open_store("qdrant", "today", path=str(tmp_path / "q")) as store:
        today = store.read_spec()
    assert today is not None
    name = today.model_identity.rsplit("@", 1)[0]
    with open_store("qdrant", "old", path=str(tmp_path / "q")) as store:
        store.ensure_collection(dataclasses.replace(today, name="old", model_identity=f"{name}@{older}"))
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "docs"), *common, "--collection", "old", *sizes]) == 0
    assert "1 chunk: 1 embedded now" in capsys.readouterr().out
    assert main(["search", "coral bleaching", *common[:6], "--collection", "old", "-k", "1"]) == 0
    assert "one.txt" in capsys.readouterr().out


def test_search_prints_text_its_stdout_cannot_encode_as_escapes(tmp_path: Path, minilm_path: Path) -> None:
    """A Chinese hit on an ASCII stdout (a Windows console redirected to a cp1252 file is the same)
    was a UnicodeEncodeError traceback, exit 1, after the search had run."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "日本.txt").write_text("北京是中华人民共和国的首都。\n", encoding="utf-8")
    store = _in_qdrant(minilm_path, tmp_path / "q", "c")
    assert _poolrag(["ingest", "docs", *store, "-q"], tmp_path).returncode == 0
    found = _poolrag(["search", "首都", *store, "-k", "1"], tmp_path, PYTHONIOENCODING="ascii")
    assert found.returncode == 0, found.stderr
    assert "\\u5317\\u4eac" in found.stdout and "\\u65e5\\u672c.txt" in found.stdout


def test_a_point_a_framework_added_is_listed_without_offsets(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    """docs/integrations.md: a point LangChain's QdrantVectorStore adds to an ingested collection is
    listed without a source. It was listed with '[None:None]' where offsets go."""
    from qdrant_client import QdrantClient, models

    from poolrag import Engine

    where = str(tmp_path / "q")
    common = [
        "--store",
        "qdrant",
        "--path",
        where,
        "--collection",
        "c",
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    assert main(["ingest", str(SAMPLES / "nature"), "--model", str(minilm_path), "--quiet", *common]) == 0
    text = "Zebra crossings are painted in white stripes on the road."
    vector = Engine(minilm_path).embed([text])[0].outputs.embedding
    client = QdrantClient(path=where)
    try:  # as langchain-qdrant writes it with content_payload_key="text"
        payload = {"text": text, "metadata": {"source": "notes/zebra.txt"}}
        client.upsert(
            "c",
            [
                models.PointStruct(
                    id="5d0c3a52-7f5e-4f2b-9d0a-2f6f2f0f0a11", vector=list(vector), payload=payload
                )
            ],
        )
    finally:
        client.close()
    capsys.readouterr()
    assert main(["search", "zebra crossing stripes", "-k", "1", "--model", str(minilm_path), *common]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert re.fullmatch(r" 1\. 0\.\d{4}", first), first  # rank and score: no source, no offsets
    assert second.strip() == text
