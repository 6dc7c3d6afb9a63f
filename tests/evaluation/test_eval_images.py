"""``poolrag eval`` on an image corpus in the BEIR layout: a corpus row's ``image`` names a file in
the dataset folder (a photograph, or a PDF whose pages are its chunks), and each query's ranking is
the engine's own cosine of the query text against the images; bad rows stop the run naming them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.errors import InvalidInputError
from poolrag.evaluation import BeirDataset, BeirFormatError
from poolrag.evaluation.run import Evaluation, corpus_documents
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.ingest.pdf_pages import PageRendering, render_page
from poolrag.stores import open_store
from poolrag.testing.page_corpus import copy_photo, truncated_png, write_pdf
from poolrag.testing.tiny_models import build_clip

pytest.importorskip("pypdfium2", reason="PDF pages need the images extra (pypdfium2)")
QUERIES = {"q1": "a portrait of an admiral", "q2": "a chart of rainfall", "q3": "the note on bees"}
QRELS = [("q1", "hopper", 1), ("q2", "report", 1), ("q3", "note", 1)]


@pytest.fixture(scope="module")
def clip_engine(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))


def write_dataset(folder: Path, rows: list[dict] | None = None) -> Path:
    (folder / "images").mkdir(parents=True)
    copy_photo(folder / "images" / "hopper.jpg")
    write_pdf(folder / "images" / "report.pdf", ["Rainfall by month.", "Rainfall by region."])
    rows = rows or [
        {"_id": "hopper", "image": "images/hopper.jpg", "title": "Grace Hopper"},
        {"_id": "report", "image": "images/report.pdf"},
        {"_id": "note", "title": "Bees", "text": "Foragers dance to tell where flowers are."},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    (folder / "qrels").mkdir()
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{s}" for q, d, s in QRELS)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def _evaluation(engine: Engine, root: Path) -> Evaluation:
    embedder = CachedEmbedder(engine, EmbeddingCache(root / "cache.sqlite"))
    pipeline = IngestPipeline(
        open_store("qdrant", "eval", path=str(root / "q")),
        DenseEncoder(embedder),
        TokenChunker.for_model(engine.tokenizer, engine.facts, 32),
        checkpoint_dir=root / "ck",
        progress=False,
    )
    return Evaluation(pipeline, embedder)


def test_each_query_ranks_the_images_as_the_engine_s_cosine_does(clip_engine: Engine, tmp_path: Path) -> None:
    dataset = BeirDataset(write_dataset(tmp_path / "beir"))
    evaluation = _evaluation(clip_engine, tmp_path)
    try:
        report = evaluation.run(dataset, ["dense"], k=3, prune=True)
    finally:
        evaluation.pipeline.store.close()
    assert (report.ingest.documents, report.ingest.chunks) == (3, 4)  # the PDF's two pages are its chunks
    folder = tmp_path / "beir" / "images"
    rendering = PageRendering()
    chunks = {
        "hopper": [folder / "hopper.jpg"],
        "report": [render_page(folder / "report.pdf", i, rendering) for i in (0, 1)],
    }
    for query_id, text in QUERIES.items():
        query = clip_engine.embed_array([text])[0]
        best = {doc: float(np.max(clip_engine.embed_array(inputs) @ query)) for doc, inputs in chunks.items()}
        best["note"] = float(
            clip_engine.embed_array(["Bees\n\nForagers dance to tell where flowers are."])[0] @ query
        )
        want = sorted(best, key=best.get, reverse=True)
        got = report.runs["dense"][query_id]
        assert [doc for doc, _ in got] == want
        np.testing.assert_allclose([score for _, score in got], [best[d] for d in want], atol=1e-5)


def test_rows_naming_images_need_a_model_that_reads_them(tmp_path: Path) -> None:
    dataset = BeirDataset(write_dataset(tmp_path / "beir"))
    with pytest.raises(
        InvalidInputError,
        match=r"document 'hopper' is an image \(images/hopper.jpg\), and this model reads text only",
    ):
        list(corpus_documents(dataset, images=None))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"_id": "x", "image": "../outside.png"}, "image '../outside.png' is outside the dataset folder"),
        ({"_id": "x", "image": "images/cut.png"}, r"document 'x' \(images/cut.png\): not a readable image"),
        ({"_id": "x", "image": "images/missing.png"}, r"document 'x' \(images/missing.png\): "),
        ({"_id": "x", "image": 7}, '"image" must name a file in the dataset folder, got 7'),
    ],
    ids=["outside", "truncated", "missing", "not-a-name"],
)
def test_a_bad_image_row_stops_the_run_naming_it(tmp_path: Path, row: dict, message: str) -> None:
    folder = write_dataset(tmp_path / "beir", [row])
    truncated_png(folder / "images" / "cut.png")
    (tmp_path / "outside.png").write_bytes((folder / "images" / "hopper.jpg").read_bytes())
    with pytest.raises((InvalidInputError, BeirFormatError), match=message):
        list(corpus_documents(BeirDataset(folder), images=PageRendering()))
