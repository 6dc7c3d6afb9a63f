"""Image files and PDF pages through the ingest pipeline, for a model that reads images (CLIP):
each image one row, each page one row naming its file and page, vectors the engine's own for that
image or rendered page; hostile files are one line each and lose nothing else."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.chunker import Chunk
from poolrag.ingest.pdf_pages import PageRendering, render_page
from poolrag.ingest.readers import Document, FileDocument, count_documents
from poolrag.ingest.visual_documents import ImageDocument, PdfDocument, file_digest
from poolrag.retrieval import Retriever
from poolrag.stores import open_store
from poolrag.testing.page_corpus import (
    copy_photo,
    inflating_pdf,
    oriented_photo,
    png_claiming,
    truncated_png,
    write_pdf,
)
from poolrag.testing.tiny_models import build_clip, build_colqwen2

pytest.importorskip("pypdfium2", reason="PDF pages need the images extra (pypdfium2)")
pytest.importorskip("matplotlib", reason="the page corpus is written by matplotlib (test extra)")

PAGES = ["Honeybees dance to point at flowers.", "A photograph of Grace Hopper.", "Compilers translate code."]
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nnewpath 0 0 moveto 10 10 lineto stroke\n"
RENDERING = PageRendering(dpi=72, max_side=256)


@pytest.fixture(scope="module")
def clip_engine(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))


def _folder(root: Path) -> Path:
    """A photograph, a three-page PDF (the photograph on page 2) and a text note."""
    root.mkdir()
    copy_photo(root / "hopper.jpg")
    write_pdf(root / "report.pdf", PAGES, photo_on=1)
    (root / "note.txt").write_text("A short note about honey and wax.")
    return root


def _hostile(root: Path) -> dict[str, str]:
    """Files a real folder can hold that no model can read, and the reason each is left out."""
    truncated_png(root / "cut.png")
    (root / "bomb-header.png").write_bytes(png_claiming(20000, 20000))
    (root / "notes.jpg").write_text("a text file with a picture's name")
    (root / "inflating.pdf").write_bytes(inflating_pdf(1 << 30))
    (root / "fake.pdf").write_text("not a PDF at all")
    (root / "empty.pdf").write_bytes(b"")
    from PIL import Image

    Image.new("L", (5000, 1)).save(root / "strip.png")  # 80 bytes a CLIP processor makes 1,120,000 x 224
    (root / "drawing.png").write_bytes(EPS)  # Pillow would hand it to Ghostscript
    return {
        "strip.png": "one side is more than 200 times the other",
        "drawing.png": "not a readable image (not a known image format)",
        "empty.pdf": "an empty file, not a PDF",
        "cut.png": "not a readable image",
        "bomb-header.png": "the image has more than 64,000,000 pixels",
        "notes.jpg": "not a readable image",
        "inflating.pdf": "pdfium stopped on it",
        "fake.pdf": "not a readable PDF",
    }


def test_images_are_read_only_and_pdfs_as_pages_only_for_a_model_that_reads_them(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs")
    # a text model: the note, and the PDF's text layer (tests/ingest/test_pdf_text.py); no photograph
    assert [type(d) for d in read_paths([folder])] == [FileDocument, Document]
    assert count_documents([folder]) == 2
    docs = {Path(d.source).name: d for d in read_paths([folder], images=RENDERING)}
    assert count_documents([folder], images=True) == 3
    assert isinstance(docs["hopper.jpg"], ImageDocument) and isinstance(docs["note.txt"], FileDocument)
    pdf = docs["report.pdf"]
    assert isinstance(pdf, PdfDocument)
    assert [t.strip() for t in pdf.page_texts] == PAGES  # the text layer matplotlib wrote
    chunks = list(pdf.chunks())
    assert [c.metadata["page"] for c in chunks] == [1, 2, 3]
    assert {c.metadata["filename"] for c in chunks} == {"report.pdf"}
    assert all(c.metadata["modality"] == "image" for c in chunks)
    assert len({c.id for c in chunks}) == 3


def test_a_picture_named_on_the_command_line_says_what_ingest_reads(tmp_path: Path) -> None:
    """Named on the command line, a file is read whatever its suffix: a photo given to a text model,
    or a HEIC photo to CLIP, was left out as 'not UTF-8 text (invalid start byte)'."""
    photo = copy_photo(tmp_path / "hopper.jpg")
    heic = tmp_path / "hopper.heic"  # a format the engine does not decode
    heic.write_bytes(b"\x00\x00\x00\x18ftypheic\xff\xfe")
    skipped: list = []
    assert list(read_paths([photo, heic], skipped=skipped)) == []  # a text model
    reasons = {Path(s.path).name: s.reason for s in skipped}
    assert reasons["hopper.jpg"] == (
        "a .jpg file, which this model cannot read (it reads text; CLIP or ColPali read images)"
    )
    assert reasons["hopper.heic"].startswith("a .heic picture: ingest reads .png, .jpg, .jpeg, .webp, .gif, ")
    assert reasons["hopper.heic"].endswith(", .pdf (convert it to one of them)")
    skipped.clear()
    assert [type(d) for d in read_paths([photo, heic], images=RENDERING, skipped=skipped)] == [ImageDocument]
    assert [Path(s.path).name for s in skipped] == ["hopper.heic"]


@pytest.mark.parametrize("suffix", [".tif", ".tiff", ".gif", ".bmp", ".webp", ".ico", ".jfif", ".jpe"])
def test_every_format_the_engine_decodes_is_read_in_a_folder_and_named_alike(
    suffix: str, tmp_path: Path, clip_engine
) -> None:
    """Seen from outside: with CLIP, a folder of .tif/.gif/.bmp files was skipped without a word and
    the run said 'no documents in tifs: poolrag reads ... images', and named on the command line
    each was 'a .tiff picture: ingest reads .png, .jpg ...', though the engine reads them."""
    from PIL import Image

    folder = tmp_path / "pictures"
    folder.mkdir()
    picture = folder / f"hopper{suffix}"
    Image.open(copy_photo(tmp_path / "hopper.jpg")).resize((64, 64)).save(picture)
    assert count_documents([folder], images=True) == 1
    for given in (folder, picture):
        skipped: list = []
        (document,) = read_paths([given], images=RENDERING, skipped=skipped)
        assert isinstance(document, ImageDocument) and not skipped
    (chunk,) = document.chunks()
    vector = clip_engine.embed_array([chunk.model_input()])
    assert vector.shape[0] == 1 and np.isfinite(vector).all()
    # a text model names them as it names a .png: files of a model that reads images
    skipped = []
    assert list(read_paths([picture], skipped=skipped)) == []
    assert skipped[0].reason == (
        f"a {suffix} file, which this model cannot read (it reads text; CLIP or ColPali read images)"
    )


def test_a_tiff_of_several_pages_says_it_reads_the_first_only(tmp_path: Path, caplog) -> None:
    """A scanned document saved as one TIFF of 3 pages is its first page (as the engine reads it):
    the 2 pages left out are said in one line naming the file, not dropped unsaid."""
    from PIL import Image

    photo = Image.open(copy_photo(tmp_path / "hopper.jpg")).resize((64, 64))
    scan = tmp_path / "scan.tiff"
    photo.save(scan, save_all=True, append_images=[photo.rotate(90), photo.rotate(180)])
    single = tmp_path / "single.tiff"
    photo.save(single)
    caplog.clear()
    documents = list(read_paths([scan, single], images=RENDERING))
    assert [type(d) for d in documents] == [ImageDocument, ImageDocument]
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert lines == [f"{scan}: a TIFF of 3 pages; only its first page is read (2 left out)"]


def test_an_animation_is_noted_and_a_camera_mpo_is_not(tmp_path: Path, caplog) -> None:
    """An animated GIF's frames left out are one note; a camera's MPO (a JPEG with a stereo view or
    a preview as its second frame) is one picture, with nothing to say."""
    from PIL import Image

    photo = Image.open(copy_photo(tmp_path / "hopper.jpg")).resize((64, 64))
    animation = tmp_path / "spin.gif"
    photo.save(animation, save_all=True, append_images=[photo.rotate(90), photo.rotate(180)])
    camera = tmp_path / "camera.jpg"  # how cameras name their MPO files
    photo.save(camera, "MPO", save_all=True, append_images=[photo.rotate(1)])
    caplog.set_level(logging.INFO, logger="poolrag")
    caplog.clear()
    documents = list(read_paths([animation, camera], images=RENDERING))
    assert [type(d) for d in documents] == [ImageDocument, ImageDocument]
    lines = [r.getMessage() for r in caplog.records if "frame" in r.getMessage()]
    assert lines == [f"{animation}: an animation of 3 frames; only its first frame is read (2 left out)"]


def test_each_hostile_file_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "docs")
    reasons = _hostile(folder)
    skipped: list = []
    docs = list(read_paths([folder], images=RENDERING, skipped=skipped))
    assert sorted(Path(d.source).name for d in docs) == ["hopper.jpg", "note.txt", "report.pdf"]
    assert len(skipped) == len(reasons)
    for item in skipped:
        assert reasons[Path(item.path).name] in item.reason, str(item)
        assert "\n" not in str(item)


def test_a_different_rendering_is_a_different_page(tmp_path: Path) -> None:
    """The rendering is part of a page's id and its document's digest: changing it re-embeds."""
    pdf = write_pdf(tmp_path / "one.pdf", ["a page"])
    (small,) = read_paths([pdf], images=RENDERING)
    (large,) = read_paths([pdf], images=PageRendering(dpi=144, max_side=512))
    assert small.digest != large.digest
    assert {c.id for c in small.chunks()}.isdisjoint(c.id for c in large.chunks())


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_pages_and_images_land_as_rows_naming_file_and_page(kind: str, tmp_path: Path, clip_engine) -> None:
    folder = _folder(tmp_path / "docs")
    location = {"uri": str(tmp_path / "m.db")} if kind == "milvus" else {"path": str(tmp_path / "q")}

    def run(rendering: PageRendering, collection: str = "pages"):
        store = open_store(kind, collection, **location)
        embedder = CachedEmbedder(clip_engine, EmbeddingCache(tmp_path / "cache.sqlite"))
        pipeline = IngestPipeline(
            store,
            DenseEncoder(embedder),
            TokenChunker.for_model(clip_engine.tokenizer, clip_engine.facts, 32),
            batch_size=2,
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        )
        return store, pipeline.run(read_paths([folder], images=rendering))

    store, report = run(RENDERING)
    try:
        assert (report.documents, report.chunks, report.embedded) == (3, 5, 5)
        hits = store.search(np.ones(clip_engine.facts.embedding_dim, np.float32), 10)
        rows = {(Path(h.payload["source"]).name, h.payload.get("page")): h for h in hits}
        pages = {("report.pdf", p) for p in (1, 2, 3)}
        assert set(rows) == {("note.txt", None), ("hopper.jpg", None)} | pages
        assert rows[("report.pdf", 2)].payload["text"].strip() == PAGES[1]
        assert rows[("hopper.jpg", None)].payload["modality"] == "image"
        assert "modality" not in rows[("note.txt", None)].payload

        # each row's vector is the engine's own for that file or rendered page
        pdf = folder / "report.pdf"
        inputs = [folder / "hopper.jpg", *(render_page(pdf, i, RENDERING) for i in range(3))]
        expected = clip_engine.embed_array(inputs)
        ids = [rows[("hopper.jpg", None)].id, *(rows[("report.pdf", p)].id for p in (1, 2, 3))]
        stored = store.fetch_vectors(ids)
        np.testing.assert_allclose(np.stack([stored[i] for i in ids]), expected, atol=1e-5)

        # a text query finds them through the usual retriever, its results naming file and page
        results = Retriever(store, clip_engine).search("a photograph of a person", 5)
        assert {(Path(r.source).name, r.payload.get("page")) for r in results} == set(rows)
    finally:
        store.close()

    store, again = run(RENDERING)  # a re-run stores nothing new
    store.close()
    assert (again.embedded, again.upserted, again.chunks_existing) == (0, 0, 5)

    store, elsewhere = run(RENDERING, "copy")  # a new collection: every vector from the cache
    store.close()
    assert (elsewhere.embedded, elsewhere.from_cache) == (0, 5)

    store, redrawn = run(PageRendering(dpi=96, max_side=320))  # other pixels: the pages again
    try:
        assert redrawn.embedded == 3 and redrawn.deleted == 3 and store.count() == 5
    finally:
        store.close()


def _pdf_with_a_strip_page(path: Path) -> Path:
    """Two pages: a letter-sized one and a 100 x 0.25 inch strip, which renders 256 x 1 pixels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        for size in ((4.25, 5.5), (100, 0.25)):
            figure = plt.figure(figsize=size)
            figure.text(0.05, 0.5, "a page")
            pdf.savefig(figure)
            plt.close(figure)
    return path


@pytest.mark.parametrize("model", ["clip", "colqwen2"])
def test_a_page_that_cannot_be_prepared_leaves_its_file_out_and_the_run_goes_on(
    model: str, tmp_path: Path, minilm_path: Path, clip_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page is rendered only when its batch is embedded, so a page the model cannot take (here
    a strip; a render over pdfium's limits alike) is found there: its file is left out with one
    line naming the page, under the path given as the reader names the files it leaves out, and
    not counted among the documents ingested (seen from outside: '/tmp/x/hostile/strip.pdf: page
    1: ...' beside relative lines, and 'ingested 3 documents' with the strip among them); the other
    files are stored, and a re-run tries that file again."""
    from poolrag.ingest import ColbertEncoder

    engine = clip_engine if model == "clip" else Engine(build_colqwen2(tmp_path / "colqwen2", minilm_path))
    docs = tmp_path / "docs"
    docs.mkdir()
    copy_photo(docs / "a-photo.jpg")
    _pdf_with_a_strip_page(docs / "b-strip.pdf")
    write_pdf(docs / "c-report.pdf", PAGES[:2])

    def run():
        store = open_store("qdrant", "pages", path=str(tmp_path / "q"))
        if model == "clip":
            encoder = DenseEncoder(CachedEmbedder(engine, EmbeddingCache(tmp_path / "cache.sqlite")))
        else:
            encoder = ColbertEncoder(engine)
        pipeline = IngestPipeline(
            store,
            encoder,
            TokenChunker.for_model(engine.tokenizer, engine.facts, 32),
            batch_size=2,
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        )
        try:
            report = pipeline.run(read_paths(["docs"], images=RENDERING, texts=False))
            rows = Counter(Path(source).name for source in store.list_sources().values())
        finally:
            store.close()
        return report, rows

    monkeypatch.chdir(tmp_path)
    report, rows = run()
    (skipped,) = report.skipped
    assert skipped == (
        "docs/b-strip.pdf: page 2: the image is 256x1: one side is more than 200 times the other, "
        "which an image processor would scale up without bound"
    )
    assert report.documents == 2
    # the strip's first page shared a batch with the photograph, stored before its second failed
    assert rows == {"a-photo.jpg": 1, "b-strip.pdf": 1, "c-report.pdf": 2}
    again, rows_again = run()
    assert again.skipped == report.skipped and rows_again == rows
    assert (again.chunks_existing, again.embedded, again.upserted) == (4, 0, 0)  # only page 2 tried


@dataclass(frozen=True)
class _AsOpened:
    """The file's pixels as stored (a PIL image is read as given): what poolrag embedded an image
    file as before it read EXIF orientations."""

    path: Path

    def load(self) -> object:
        from PIL import Image

        return Image.open(self.path)


class _IngestedBefore(ImageDocument):
    """An image file as ingest listed it before it read orientations: the file's own chunk id,
    its pixels on their side."""

    def chunks(self) -> Iterator[Chunk]:
        for chunk in super().chunks():
            yield replace(chunk, image=_AsOpened(self.path))


def test_a_phone_photo_stored_on_its_side_is_embedded_again_upright(
    tmp_path: Path, clip_engine: Engine
) -> None:
    """A collection ingested before poolrag read EXIF orientations holds a phone photo on its side,
    under an id made of the file's bytes: the next run lists it under an id of its own, embeds it
    upright and drops the old row; a photo without the tag is left as stored."""
    folder = tmp_path / "photos"
    folder.mkdir()
    plain, turned = oriented_photo(folder / "plain.jpg", None), oriented_photo(folder / "turned.jpg", 6)

    def run(documents: Iterable[object]):
        store = open_store("qdrant", "photos", path=str(tmp_path / "q"))
        pipeline = IngestPipeline(
            store,
            DenseEncoder(CachedEmbedder(clip_engine, EmbeddingCache(tmp_path / "cache.sqlite"))),
            TokenChunker.for_model(clip_engine.tokenizer, clip_engine.facts, 32),
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        )
        return store, pipeline.run(documents)

    documents = [
        _IngestedBefore(p.resolve().as_posix(), p, file_digest(p), {"filename": p.name})
        for p in (plain, turned)
    ]
    store, before = run(documents)
    store.close()
    assert before.upserted == 2

    listed = list(read_paths([folder], images=RENDERING))
    assert [d.upright for d in listed] == [False, True]
    store, after = run(listed)
    try:
        assert (after.embedded, after.deleted, after.chunks_existing, store.count()) == (1, 1, 1, 2), after
        rows = {Path(h.payload["source"]).name: h.id for h in store.search(np.ones(16, np.float32), 10)}
        stored = store.fetch_vectors([rows["plain.jpg"], rows["turned.jpg"]])
        want = clip_engine.embed_array([plain, turned])  # upright, as sentence-transformers embeds the path
        np.testing.assert_allclose(
            np.stack([stored[rows[n]] for n in ("plain.jpg", "turned.jpg")]), want, atol=1e-5
        )
    finally:
        store.close()
    store, again = run(read_paths([folder], images=RENDERING))  # and then nothing more
    store.close()
    assert (again.embedded, again.chunks_existing) == (0, 2)
