"""ColPali, ColQwen2 and ColModernVBERT folders through the engine: a vector per query token and per
page position, the checkpoint's own, and MaxSim of a query over a page as the model's processor scores it.

Each folder is a tiny random ``ColPaliForRetrieval`` / ``ColQwen2ForRetrieval`` and its processor
saved by transformers (ColQwen2 reads each page at its own resolution and ColModernVBERT cuts it into
tiles, so pages of one batch have different patch or tile counts);
the pages are real photographs shipped in a package (matplotlib's sample data) and a PDF page
rendered by pdfium.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from transformers.image_transforms import convert_to_rgb

from poolrag import Engine, PoolingParams
from poolrag.errors import DimensionsError, InvalidInputError, UnsupportedTaskError
from poolrag.testing.tiny_models import build_colmodernvbert, build_colpali, build_colqwen2

PIL = pytest.importorskip("PIL.Image", reason="pages need the images extra (Pillow)")
SAMPLES = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data"
PHOTOS = [SAMPLES / "grace_hopper.jpg", SAMPLES / "Minduka_Present_Blue_Pack.png", SAMPLES / "logo2.png"]
QUERIES = ["a portrait of an admiral", "blue", "which logo is on the page with the most text in it?"]


def _opened(path: Path) -> object:
    """The picture in RGB as transformers' ``convert_to_rgb`` shows it (transparency on white), as
    the engine reads it whatever the processor would do with an RGBA picture."""
    return PIL.fromarray(convert_to_rgb(PIL.open(path), return_numpy=True))


BUILDERS = {"colpali": build_colpali, "colqwen2": build_colqwen2, "colmodernvbert": build_colmodernvbert}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def colpali(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm_path: Path
) -> Path:
    return BUILDERS[request.param](tmp_path_factory.mktemp(request.param), minilm_path)


def _reference_classes(folder: Path) -> tuple[type, type]:
    model_class = getattr(transformers, json.loads((folder / "config.json").read_text())["architectures"][0])
    return model_class, transformers.AutoProcessor


@pytest.fixture(scope="module")
def engine(colpali: Path) -> Engine:
    return Engine(colpali)


@pytest.fixture(scope="module")
def reference(colpali: Path) -> dict[str, object]:
    """transformers' own: the processor's pages and queries through the model, padded as a batch."""
    model_class, processor_class = _reference_classes(colpali)
    model = model_class.from_pretrained(colpali).eval()
    processor = processor_class.from_pretrained(colpali)
    pages = processor.process_images(images=[_opened(p) for p in PHOTOS])
    queries = processor.process_queries(text=QUERIES)
    with torch.no_grad():
        page_vectors = model(**pages).embeddings
        query_vectors = model(**queries).embeddings
    return {
        "pages": [v[m.bool()].numpy() for v, m in zip(page_vectors, pages["attention_mask"], strict=True)],
        "queries": [
            v[m.bool()].numpy() for v, m in zip(query_vectors, queries["attention_mask"], strict=True)
        ],
        # one page at a time: in a padded batch the processor's MaxSim also counts the zero vectors
        # of a shorter page's padding (a max of 0), which depends on the batch the page came in
        "scores": np.stack(
            [
                processor.score_retrieval(query_vectors, [page]).numpy()[:, 0]
                for page in _unpadded(page_vectors, pages)
            ],
            axis=1,
        ),
    }


def _unpadded(vectors: torch.Tensor, encoded: dict) -> list[torch.Tensor]:
    return [v[m.bool()] for v, m in zip(vectors, encoded["attention_mask"], strict=True)]


def _token_vectors(engine: Engine, inputs: list) -> list[np.ndarray]:
    return [np.asarray(out.outputs.data) for out in engine.encode(inputs, pooling_task="token_embed")]


def test_pages_and_queries_get_the_checkpoint_s_own_token_vectors(engine: Engine, reference) -> None:
    assert engine.supported_tasks == ("token_embed", "score") and engine.embedding_dim == 16
    assert engine.facts.reads_images and engine.facts.score_kind.value == "maxsim"
    for got, want in zip(_token_vectors(engine, PHOTOS), reference["pages"], strict=True):
        assert got.shape == want.shape  # its image tokens and the visual prompt
        np.testing.assert_allclose(got, want, atol=1e-5)
    # a query is its processor's prompt, the query and the augmentation tokens it attends to
    for got, want in zip(_token_vectors(engine, QUERIES), reference["queries"], strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_query_scores_against_pages_by_maxsim_as_the_processor_does(engine: Engine, reference) -> None:
    """Over each page's own positions, whatever else was in its batch."""
    for i, query in enumerate(QUERIES):
        scores = [out.outputs.score for out in engine.score(query, PHOTOS)]
        np.testing.assert_allclose(scores, reference["scores"][i], rtol=1e-5)


def test_a_rendered_pdf_page_is_a_page_like_any_image(engine: Engine, colpali: Path, tmp_path: Path) -> None:
    pytest.importorskip("pypdfium2", reason="PDF pages need the images extra (pypdfium2)")
    from poolrag.ingest.pdf_pages import PageRendering, render_page
    from poolrag.testing.page_corpus import write_pdf

    page = render_page(write_pdf(tmp_path / "one.pdf", ["Quarterly report"], photo_on=0), 0, PageRendering())
    model_class, processor_class = _reference_classes(colpali)
    model = model_class.from_pretrained(colpali).eval()
    processor = processor_class.from_pretrained(colpali)
    with torch.no_grad():
        want = model(**processor.process_images(images=[page])).embeddings[0]
    np.testing.assert_allclose(_token_vectors(engine, [page])[0], want.numpy(), atol=1e-5)


def test_a_page_is_decoded_within_the_image_limits(engine: Engine) -> None:
    with pytest.raises(InvalidInputError, match=r"input\[1\]: not a readable image"):
        engine.encode([PHOTOS[0], b"not an image"], pooling_task="token_embed")


def test_a_strip_is_one_line_naming_it_and_one_at_the_ratio_is_read(engine: Engine) -> None:
    """A 1 x 5000 divider strip: ColQwen2's processor refused it (a ValueError that was a traceback
    in ingest and a 500 in serve) and CLIP's scaled it to gigabytes; every model now refuses it
    from its header, naming it. A strip at 200:1, the ratio ColQwen2's processor still takes, is read."""
    strip = PIL.new("RGB", (1, 5000), "white")
    with pytest.raises(
        InvalidInputError,
        match=r"^input\[1\]: the image is 1x5000: one side is more than 200 times the other",
    ):
        engine.encode([PHOTOS[0], strip], pooling_task="token_embed")
    assert len(engine.encode([PIL.new("RGB", (1, 200), "white")], pooling_task="token_embed")) == 1


def test_a_page_retriever_has_no_single_vector_to_give(engine: Engine) -> None:
    with pytest.raises(
        UnsupportedTaskError,
        match="task 'embed' is not supported by this model; supported tasks: token_embed, score",
    ):
        engine.embed(["a query"])
    with pytest.raises(DimensionsError, match="not a Matryoshka model"):
        engine.encode(["a query"], pooling_task="token_embed", pooling_params=PoolingParams(dimensions=8))


@pytest.mark.parametrize("name", ["colpali", "colqwen2"])
def test_sentence_transformers_multi_vector_encoder_gives_the_same_vectors(
    name: str, tmp_path: Path, minilm_path: Path
) -> None:
    """sentence-transformers 6.2 loads the same folders (its ``MultiVectorEncoder``; it fails inside
    ModernVBERT's embedding on a ColModernVBERT folder, so that family is checked against
    transformers alone)."""
    from sentence_transformers import MultiVectorEncoder

    folder = BUILDERS[name](tmp_path / name, minilm_path)
    pages = [_opened(p) for p in PHOTOS]
    reference = MultiVectorEncoder(str(folder), device="cpu")
    want = list(reference.encode_document(pages)) + list(reference.encode_query(QUERIES))
    engine = Engine(folder)
    got = _token_vectors(engine, pages) + _token_vectors(engine, QUERIES)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.asarray(w), atol=1e-5)


def test_a_query_s_vectors_do_not_depend_on_its_batch(engine: Engine) -> None:
    """Alone, or batched with shorter and longer texts (other callers' requests on a server): the
    same vectors. PaliGemma builds its attention from the processor's token types; without them a
    query padded in a batch read differently."""
    alone = _token_vectors(engine, ["monthly rainfall"])[0]
    for others in (["x"], ["y z"], ["a much longer query about the rainfall of every month of the year"]):
        batched = _token_vectors(engine, ["monthly rainfall", *others])[0]
        np.testing.assert_allclose(batched, alone, atol=1e-5)
    page = _token_vectors(engine, [PHOTOS[0]])[0]
    np.testing.assert_allclose(_token_vectors(engine, [PHOTOS[0], PHOTOS[2]])[0], page, atol=1e-5)


def test_llm_takes_vllm_s_multimodal_prompts_for_pages(engine: Engine, colpali: Path) -> None:
    """vLLM's offline form: a page as ``{"prompt": "", "multi_modal_data": {"image": ...}}``, a
    query as its text; ``LLM.encode`` and ``LLM.score`` answer as the engine does."""
    from poolrag import LLM

    llm = LLM(model=str(colpali))
    page = PIL.open(PHOTOS[0]).convert("RGB")
    outputs = llm.encode(
        [{"prompt": "", "multi_modal_data": {"image": page}}, QUERIES[0]], pooling_task="token_embed"
    )
    want = _token_vectors(engine, [PHOTOS[0], QUERIES[0]])
    for out, w in zip(outputs, want, strict=True):
        np.testing.assert_allclose(np.asarray(out.outputs.data), w, atol=1e-6)
    scored = llm.score(QUERIES[0], [{"prompt": "", "multi_modal_data": {"image": page}}])
    assert scored[0].outputs.score == pytest.approx(
        engine.score(QUERIES[0], [PHOTOS[0]])[0].outputs.score, rel=1e-6
    )
