"""``poolrag ingest FOLDER`` of images and PDFs with a model that reads images, then ``poolrag search``
by text: rows name file and page; bad files are one line each; ``kill -9`` mid-run resumes to the
result of a clean run."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from kill_resume import SUBJECTS, kill_mid_run, resume, store_kwargs, store_location

from poolrag import Engine
from poolrag.cli import main
from poolrag.ingest import read_paths
from poolrag.ingest.pdf_pages import PageRendering, render_page
from poolrag.stores import open_store
from poolrag.testing.page_corpus import copy_photo, inflating_pdf, png_claiming, truncated_png, write_pdf
from poolrag.testing.tiny_models import build_clip, build_colpali, build_colqwen2

pytest.importorskip("pypdfium2", reason="PDF pages need the images extra (pypdfium2)")
pytest.importorskip("matplotlib", reason="the page corpus is written by matplotlib (test extra)")


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    return build_clip(tmp_path_factory.mktemp("clip"), minilm_path)


@pytest.fixture(scope="module")
def page_retrievers(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("page-retrievers")
    return {
        "colpali": build_colpali(root / "colpali", minilm_path),
        "colqwen2": build_colqwen2(root / "colqwen2", minilm_path),
    }


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def _poolrag(args: list[str], capsys: pytest.CaptureFixture[str]) -> Ran:
    """The command run in this process, as ``poolrag`` would run it: its exit code, stdout and stderr
    (a subprocess per command added an import of torch and no check; the killed run has its own)."""
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return Ran(code, out, err)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own poolrag cache; the variable ``--quiet`` sets in the environment, set here,
    is taken back with the test's other changes when it ends."""
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def test_a_folder_of_pdfs_and_images_is_searched_by_text_and_by_page_words(
    tmp_path: Path, clip_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    copy_photo(docs / "hopper.jpg")
    write_pdf(docs / "guide.pdf", ["Bees and flowers.", "Rivers and lakes.", "Stars and comets."])
    truncated_png(docs / "cut.png")
    (docs / "huge.png").write_bytes(png_claiming(20000, 20000))
    (docs / "inflating.pdf").write_bytes(inflating_pdf(1 << 30))
    store = ["--model", str(clip_folder), "--store", "qdrant", "--path", str(tmp_path / "q")]
    store += ["--collection", "pages"]

    ingest = _poolrag(["ingest", str(docs), *store, "--hybrid", "--quiet"], capsys)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    assert "ingested 2 documents into qdrant collection 'pages': 4 chunks: 4 embedded now" in ingest.stdout
    left_out = ingest.stderr.split("3 left out:\n", 1)[1].splitlines()
    assert sorted(line.strip().split(": ", 1)[0].rsplit("/", 1)[1] for line in left_out) == [
        "cut.png",
        "huge.png",
        "inflating.pdf",
    ]

    search = _poolrag(["search", "bees", *store, "-k", "4", "--json"], capsys)
    assert search.returncode == 0, search.stderr[-3000:]
    rows = [json.loads(line) for line in search.stdout.splitlines()]
    found = {(Path(r["source"]).name, r.get("page")) for r in rows}
    assert found == {("hopper.jpg", None), ("guide.pdf", 1), ("guide.pdf", 2), ("guide.pdf", 3)}
    assert next(r for r in rows if r.get("page") == 3)["text"].strip() == "Stars and comets."
    assert {r["modality"] for r in rows} == {"image"}  # a page or an image, said as such

    # the pages' text layer is the BM25 leg: the one page with the word is the one found
    sparse = _poolrag(["search", "comets", *store, "--mode", "sparse", "--json"], capsys)
    assert sparse.returncode == 0, sparse.stderr[-3000:]
    hits = [json.loads(line) for line in sparse.stdout.splitlines()]
    assert [(Path(h["source"]).name, h["page"]) for h in hits] == [("guide.pdf", 3)]

    shown = _poolrag(["search", "bees", *store, "-k", "4"], capsys)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "guide.pdf page 2\n" in shown.stdout and "hopper.jpg (image)\n" in shown.stdout


def test_a_re_run_counts_as_stored_only_what_is_stored(
    tmp_path: Path, clip_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A page found bad when its batch is embedded (a strip) is never stored, and every run says
    so under "left out". Seen from outside: the re-run said "up to date: 1 document ..., 2 chunks
    already stored" above that line, while the store held the photograph's one row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    docs = tmp_path / "docs"
    docs.mkdir()
    copy_photo(docs / "hopper.jpg")
    with PdfPages(docs / "strip.pdf") as pdf:  # one 100 x 0.25 inch page: 256 x 1 pixels
        figure = plt.figure(figsize=(100, 0.25))
        figure.text(0.05, 0.5, "a strip")
        pdf.savefig(figure)
        plt.close(figure)
    store = ["--model", str(clip_folder), "--store", "qdrant", "--path", str(tmp_path / "q")]
    store += ["--collection", "pages", "--page-size", "256", "--quiet"]

    first = _poolrag(["ingest", str(docs), *store], capsys)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "strip.pdf: page 1: the image is 256x1" in first.stderr
    again = _poolrag(["ingest", str(docs), *store], capsys)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.startswith(
        "up to date: 1 document in qdrant collection 'pages', 1 chunk already stored; nothing embedded"
    )
    assert "strip.pdf: page 1: the image is 256x1" in again.stderr


def test_dimensions_with_an_image_model_is_refused_before_anything_is_written(
    tmp_path: Path, clip_folder: Path, capsys
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    copy_photo(docs / "hopper.jpg")
    args = ["ingest", str(docs), "--model", str(clip_folder), "--uri", str(tmp_path / "m.db"), "--no-cache"]
    assert main([*args, "--dimensions", "8"]) == 2
    stderr = capsys.readouterr().err
    assert "--dimensions: a model that reads images stores its full vectors" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize(
    ("model", "kind"), [("colpali", "milvus"), ("colpali", "qdrant"), ("colqwen2", "qdrant")]
)
def test_a_page_retriever_stores_each_page_as_its_token_vectors(
    model: str, kind: str, tmp_path: Path, page_retrievers: dict[str, Path], capsys
) -> None:
    """ColPali: a multivector row per page and image (its image tokens and visual prompt); the
    folder's text files are not its documents. A text query is scored by MaxSim over them."""
    docs = tmp_path / "docs"
    docs.mkdir()
    copy_photo(docs / "hopper.jpg")
    write_pdf(docs / "guide.pdf", ["Bees and flowers.", "Stars and comets."], photo_on=0)
    (docs / "note.txt").write_text("A note a page retriever does not read.")
    location = store_location(kind, tmp_path)
    store = ["--model", str(page_retrievers[model]), "--store", kind, *location, "--collection", "pages"]

    ingest = _poolrag(["ingest", str(docs), *store, "--quiet", "--json"], capsys)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    report = json.loads(ingest.stdout.strip().splitlines()[-1])
    assert (report["documents"], report["chunks"], report["embedded"]) == (2, 3, 3)
    assert "1 text document not read: a page retriever reads pages" in ingest.stderr  # not silently

    search = _poolrag(["search", "where are the comets", *store, "-k", "5", "--json"], capsys)
    assert search.returncode == 0, search.stderr[-3000:]
    rows = [json.loads(line) for line in search.stdout.splitlines()]
    assert {(Path(r["source"]).name, r.get("page")) for r in rows} == {
        ("hopper.jpg", None),
        ("guide.pdf", 1),
        ("guide.pdf", 2),
    }
    # each score is the engine's own MaxSim of the query over that page's stored token vectors
    engine = Engine(page_retrievers[model])
    rendering = PageRendering()
    pages = {("hopper.jpg", None): docs / "hopper.jpg"}
    pages |= {("guide.pdf", p): render_page(docs / "guide.pdf", p - 1, rendering) for p in (1, 2)}
    expected = {
        key: out.outputs.score
        for key, out in zip(pages, engine.score("where are the comets", list(pages.values())), strict=True)
    }
    for row in rows:
        assert row["score"] == pytest.approx(expected[(Path(row["source"]).name, row.get("page"))], rel=1e-4)


@pytest.mark.slow
def test_a_killed_page_ingest_resumes_to_the_result_of_a_clean_run(tmp_path: Path, clip_folder: Path) -> None:
    """In Milvus Lite: a page is a row like a chunk of text, and tests/ingest kills and resumes text
    ingests on both stores; what is the pages' own is the render, the cache and the page ids."""
    kind = "milvus"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, subject in enumerate(SUBJECTS):  # sixteen PDFs of four pages, as the harness expects
        write_pdf(corpus / f"{i:02d}-{subject}.pdf", [f"{subject}: part {n} of the survey" for n in range(4)])
    checkpoint = tmp_path / "ingest.checkpoint.json"
    location = store_location(kind, tmp_path)
    args = [str(corpus), "--model", str(clip_folder), "--store", kind, *location, "--collection", "pages"]
    args += ["--page-dpi", "72", "--page-size", "256", "--batch-size", "1"]
    args += ["--cache", str(tmp_path / "cache.sqlite"), "--checkpoint", str(checkpoint), "--quiet", "--json"]

    done_before = kill_mid_run(args, checkpoint, signal.SIGKILL)
    report = resume(args)
    assert report["resumed"] is True and report["documents_skipped"] >= done_before
    assert report["embedded"] < 16 * 4  # what the killed run embedded came back from the cache
    assert not checkpoint.exists()

    rendering = PageRendering(dpi=72, max_side=256)
    pages = [c for doc in read_paths([corpus], images=rendering) for c in doc.chunks()]
    store = open_store(kind, "pages", **store_kwargs(kind, location))
    try:
        assert store.count() == len(pages) == 16 * 4
        assert set(store.list_sources()) == {c.id for c in pages}
        some = pages[::7]  # a page of every few documents, the killed run's and the resumed run's alike
        stored = store.fetch_vectors([c.id for c in some])
    finally:
        store.close()
    engine = Engine(clip_folder)
    clean = engine.embed_array([render_page(Path(c.source), c.index, rendering) for c in some])
    np.testing.assert_allclose(np.stack([stored[c.id] for c in some]), clean, atol=1e-5)


def test_a_page_retriever_given_only_text_files_says_what_it_reads(
    tmp_path: Path, page_retrievers: dict[str, Path], capsys
) -> None:
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "a.txt").write_text("Text is for a text model.")
    args = ["ingest", str(docs), "--model", str(page_retrievers["colpali"]), "--uri", str(tmp_path / "m.db")]
    assert main([*args, "--quiet", "--no-cache"]) == 0
    stderr = capsys.readouterr().err
    assert f"no documents in {docs}: a page retriever reads .png, .jpg, .jpeg, .webp, .gif, " in stderr
    assert ".pnm, .jfif, .jpe, .pdf files" in stderr
    assert "(text files are for a text model)" in stderr
