"""PoolragColBERTRetriever over a collection of pages that ``poolrag ingest`` filled with a page
retriever (ColPali): a text query returns the pages as LangChain documents naming file and page,
scored by the engine's own MaxSim."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_poolrag import PoolragColBERTRetriever

from poolrag import Engine
from poolrag.ingest import ColbertEncoder, IngestPipeline, TokenChunker, read_paths
from poolrag.ingest.pdf_pages import PageRendering, render_page
from poolrag.stores import open_store
from poolrag.testing.page_corpus import copy_photo, write_pdf
from poolrag.testing.tiny_models import build_colpali

pytest.importorskip("pypdfium2", reason="PDF pages need poolrag's images extra")
RENDERING = PageRendering(dpi=72, max_side=256)


@pytest.fixture(scope="module")
def colpali_engine(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_colpali(tmp_path_factory.mktemp("colpali"), minilm_path))


@pytest.fixture
def pages(tmp_path: Path, colpali_engine: Engine):
    folder = tmp_path / "docs"
    folder.mkdir()
    copy_photo(folder / "hopper.jpg")
    write_pdf(folder / "report.pdf", ["Revenue by quarter.", "Staff by office."], photo_on=1)
    store = open_store("qdrant", "pages", path=str(tmp_path / "q"))
    chunker = TokenChunker.for_model(colpali_engine.tokenizer, colpali_engine.facts, 32)
    pipeline = IngestPipeline(
        store, ColbertEncoder(colpali_engine), chunker, checkpoint_dir=tmp_path / "ck", progress=False
    )
    report = pipeline.run(read_paths([folder], images=RENDERING, texts=False))
    assert report.chunks == 3
    yield folder, store
    store.close()


def test_a_text_query_returns_pages_naming_file_and_page(colpali_engine: Engine, pages) -> None:
    folder, store = pages
    retriever = PoolragColBERTRetriever(engine=colpali_engine, store=store, k=3)
    documents = retriever.invoke("which office has the most staff?")
    found = {(d.metadata["filename"], d.metadata.get("page")) for d in documents}
    assert found == {("hopper.jpg", None), ("report.pdf", 1), ("report.pdf", 2)}
    inputs = {
        ("hopper.jpg", None): folder / "hopper.jpg",
        ("report.pdf", 1): render_page(folder / "report.pdf", 0, RENDERING),
        ("report.pdf", 2): render_page(folder / "report.pdf", 1, RENDERING),
    }
    scores = colpali_engine.score("which office has the most staff?", list(inputs.values()))
    want = {key: out.outputs.score for key, out in zip(inputs, scores, strict=True)}
    for document in documents:
        key = (document.metadata["filename"], document.metadata.get("page"))
        assert document.metadata["score"] == pytest.approx(want[key], rel=1e-5)
        assert document.metadata["modality"] == "image"
    by_page = {d.metadata.get("page"): d.page_content for d in documents}
    assert by_page[2].strip() == "Staff by office."  # the page's text layer, as LangChain's content
    assert [d.metadata["score"] for d in documents] == sorted(
        (d.metadata["score"] for d in documents), reverse=True
    )


async def test_the_async_path_finds_the_same_pages(colpali_engine: Engine, pages) -> None:
    _, store = pages
    retriever = PoolragColBERTRetriever(engine=colpali_engine, store=store, k=2)
    query = "revenue by quarter"
    got = await retriever.ainvoke(query)
    assert [d.id for d in got] == [d.id for d in retriever.invoke(query)]
