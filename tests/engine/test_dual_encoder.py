"""A CLIP folder through the engine: texts and images into one space, the checkpoint's own vectors.

The folder is a tiny random ``CLIPModel`` and ``CLIPImageProcessor`` saved by transformers; the
images are real photographs shipped in a package (matplotlib's sample data), read as a PIL image,
as bytes, as a path and as a data URL.
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from transformers.image_transforms import convert_to_rgb

from poolrag import Engine, PoolingParams
from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.testing.page_corpus import oriented_photo
from poolrag.testing.tiny_models import SENTENCES, build_clip, build_siglip, build_siglip2

PIL = pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")
SAMPLES = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data"
PHOTOS = [SAMPLES / "grace_hopper.jpg", SAMPLES / "Minduka_Present_Blue_Pack.png", SAMPLES / "logo2.png"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    return build_clip(tmp_path_factory.mktemp("clip"), minilm_path)


@pytest.fixture(scope="module")
def engine(clip: Path) -> Engine:
    return Engine(clip)


def _normalized(rows: torch.Tensor) -> np.ndarray:
    return torch.nn.functional.normalize(rows.float(), dim=-1).numpy()


@pytest.fixture(scope="module")
def reference(clip: Path) -> tuple[np.ndarray, np.ndarray]:
    """transformers' own: the texts padded with an attention mask, the photos as opened through the
    saved processor (two are RGBA: their transparency shows on white, as the processor shows it)."""
    model = transformers.CLIPModel.from_pretrained(clip).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(clip)
    processor = transformers.CLIPImageProcessor.from_pretrained(clip)
    with torch.no_grad():
        texts = model.get_text_features(
            **tokenizer(SENTENCES, padding=True, return_tensors="pt")
        ).pooler_output
        pixels = processor(images=[PIL.open(p) for p in PHOTOS], return_tensors="pt")
        images = model.get_image_features(pixel_values=pixels["pixel_values"]).pooler_output
    return _normalized(texts), _normalized(images)


def test_texts_and_images_get_the_checkpoint_s_own_vectors(engine: Engine, reference) -> None:
    texts, images = reference
    assert engine.supported_tasks == ("embed", "score") and engine.embedding_dim == 16
    np.testing.assert_allclose(engine.embed_array(SENTENCES), texts, atol=1e-5)
    np.testing.assert_allclose(engine.embed_array(PHOTOS), images, atol=1e-5)
    # usage counts what the vision tower read: a 4 x 4 grid of 8-pixel patches and the class token
    assert [out.num_tokens for out in engine.embed([PHOTOS[0], "a portrait"])] == [17, 4]


def test_every_image_form_is_the_same_image(engine: Engine, reference) -> None:
    photo = PHOTOS[0]
    data = photo.read_bytes()
    url = "data:image/jpeg;base64," + base64.b64encode(data).decode()
    forms = [PIL.open(photo), data, photo, url]
    got = engine.embed_array(forms)
    np.testing.assert_allclose(got, np.repeat(reference[1][:1], len(forms), axis=0), atol=1e-5)


def test_one_call_mixes_texts_and_images_in_their_order(engine: Engine, reference) -> None:
    texts, images = reference
    got = engine.embed_array([PHOTOS[1], SENTENCES[0], PHOTOS[2], SENTENCES[2]])
    np.testing.assert_allclose(got, np.stack([images[1], texts[0], images[2], texts[2]]), atol=1e-5)


def test_a_text_scores_against_an_image_by_cosine(engine: Engine, reference) -> None:
    texts, images = reference
    scores = [s.outputs.score for s in engine.score(SENTENCES[0], PHOTOS)]
    np.testing.assert_allclose(scores, images @ texts[0], atol=1e-5)


def test_matryoshka_dimensions_and_normalize_apply_to_images_too(clip: Path) -> None:
    from poolrag import PoolingParams

    engine = Engine(clip, hf_overrides={"is_matryoshka": True})
    raw = engine.embed_array(PHOTOS[:1], pooling_params=PoolingParams(normalize=False))
    cut = engine.embed_array(PHOTOS[:1], pooling_params=PoolingParams(dimensions=8))
    np.testing.assert_allclose(cut[0], raw[0][:8] / np.linalg.norm(raw[0][:8]), atol=1e-6)


def test_what_is_neither_a_text_nor_an_image_is_named_as_such(engine: Engine) -> None:
    """An array said "must be a string" to a model that reads images; an OpenAI content part said
    "prompt_token_ids must be a list of integers"."""
    with pytest.raises(
        InputTypeError, match=r"input\[1\] must be a text, a token prompt or an image .* not ndarray"
    ):
        engine.embed_array([PHOTOS[0], np.zeros((8, 8, 3), np.uint8)])
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(InputTypeError, match=r"input\[0\]: an OpenAI content part is not an input here"):
        engine.embed_array([part])


def test_a_text_only_model_refuses_an_image_in_one_line(tiny_model) -> None:
    with pytest.raises(InputTypeError, match=r"input\[1\]: this model reads text only"):
        Engine(tiny_model("bert")).embed(["a text", PHOTOS[0]])


def test_a_text_only_model_reads_a_data_url_string_as_the_text_it_always_was(tiny_model) -> None:
    engine = Engine(tiny_model("bert"))
    url = "data:image/png;base64,iVBORw0KGgo="
    assert engine.embed([url])[0].prompt_token_ids == engine.tokenize(url)


def test_llm_takes_vllm_s_multimodal_prompts(clip: Path, engine: Engine) -> None:
    from poolrag import LLM

    llm = LLM(model=str(clip))
    photo = PIL.open(PHOTOS[0])
    out = llm.embed([{"prompt": "", "multi_modal_data": {"image": photo}}, "a caption"])
    got = np.stack([o.outputs.embedding for o in out])
    np.testing.assert_allclose(got, engine.embed_array([PHOTOS[0], "a caption"]), atol=1e-6)
    one = llm.embed(PHOTOS[0].read_bytes())  # bytes are one image prompt, not a list of token ids
    assert len(one) == 1
    np.testing.assert_allclose(one[0].outputs.embedding, got[0], atol=1e-6)
    np.testing.assert_allclose(llm.embed(PHOTOS[0])[0].outputs.embedding, got[0], atol=1e-6)
    with pytest.raises(InvalidInputError, match="a text or an image"):
        llm.embed([{"prompt": "a caption", "multi_modal_data": {"image": photo}}])
    with pytest.raises(InvalidInputError, match="one 'image'"):
        llm.embed([{"prompt": "", "multi_modal_data": {"video": photo}}])


def test_a_siglip_folder_gets_its_own_vectors_texts_padded_to_its_length(
    tmp_path: Path, minilm_path: Path
) -> None:
    """SigLIP's text tower pools its last position, trained on texts padded to its full length with
    every position attended (its processor's ``padding="max_length"``): the engine gives it that,
    whatever else is in the batch."""
    folder = build_siglip(tmp_path / "siglip", minilm_path)
    model = transformers.SiglipModel.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    processor = transformers.SiglipImageProcessor.from_pretrained(folder)
    short = [s for s in SENTENCES if len(tokenizer(s)["input_ids"]) <= 16]
    with torch.no_grad():
        ids = tokenizer(short, padding="max_length", max_length=16, return_tensors="pt")["input_ids"]
        texts = model.get_text_features(input_ids=ids).pooler_output
        pixels = processor(images=[PIL.open(p) for p in PHOTOS], return_tensors="pt")
        images = model.get_image_features(pixel_values=pixels["pixel_values"]).pooler_output
    engine = Engine(folder)
    assert engine.max_model_len == 16
    np.testing.assert_allclose(engine.embed_array(short), _normalized(texts), atol=1e-5)
    np.testing.assert_allclose(engine.embed_array(PHOTOS), _normalized(images), atol=1e-5)
    assert engine.embed(PHOTOS[:1])[0].num_tokens == 16  # SigLIP's tower has no class token


def test_a_siglip2_folder_reads_each_picture_at_its_own_aspect_ratio(
    tmp_path: Path, minilm_path: Path
) -> None:
    """SigLIP2 (NaFlex) cuts each picture into patches at its own aspect ratio, up to a patch budget,
    and masks the rest: a tall and a wide photograph in one batch get the checkpoint's own vectors."""
    folder = build_siglip2(tmp_path / "siglip2", minilm_path)
    model = transformers.Siglip2Model.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    processor = transformers.Siglip2ImageProcessor.from_pretrained(folder)
    short = [s for s in SENTENCES if len(tokenizer(s)["input_ids"]) <= 16]
    # Siglip2ImageProcessor does not convert to RGB itself (an RGBA picture fails there); the
    # engine shows transparency on white, as transformers' convert_to_rgb, which CLIP's processor runs
    photos = [convert_to_rgb(PIL.open(p), return_numpy=True) for p in PHOTOS]
    with torch.no_grad():
        ids = tokenizer(short, padding="max_length", max_length=16, return_tensors="pt")["input_ids"]
        texts = model.get_text_features(input_ids=ids).pooler_output
        one_by_one = [
            model.get_image_features(**processor(images=[p], return_tensors="pt")).pooler_output
            for p in photos
        ]
    shapes = {tuple(processor(images=[p], return_tensors="np")["spatial_shapes"][0]) for p in photos}
    assert len(shapes) > 1  # the photographs' grids differ: the batch mixes aspect ratios
    engine = Engine(folder)
    np.testing.assert_allclose(engine.embed_array(short), _normalized(texts), atol=1e-5)
    np.testing.assert_allclose(engine.embed_array(PHOTOS), _normalized(torch.cat(one_by_one)), atol=1e-5)


def test_sentence_transformers_loading_the_same_folder_agrees(clip: Path, engine: Engine) -> None:
    """sentence-transformers 6.2 loads a transformers CLIP folder itself (its Transformer module with
    get_text_features / get_image_features), one modality per call."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(clip), device="cpu")
    images = reference.encode([PIL.open(p) for p in PHOTOS], normalize_embeddings=True)
    texts = reference.encode(SENTENCES, normalize_embeddings=True)
    np.testing.assert_allclose(engine.embed_array(PHOTOS), images, atol=1e-5)
    np.testing.assert_allclose(engine.embed_array(SENTENCES), texts, atol=1e-5)


def test_a_phone_photo_gets_sentence_transformers_vector_of_it_upright(
    clip: Path, engine: Engine, tmp_path: Path
) -> None:
    """JPEGs with EXIF orientation 3, 6 and 8 (and one without the tag), as a path, their bytes and
    a data URL: sentence-transformers given the path (through transformers' ``load_image``) embeds
    the photo upright; poolrag embedded it on its side (0.17 apart on this model)."""
    from sentence_transformers import SentenceTransformer

    paths = [oriented_photo(tmp_path / f"photo-{o}.jpg", o) for o in (None, 3, 6, 8)]
    reference = SentenceTransformer(str(clip), device="cpu")
    want = reference.encode([{"image": str(p)} for p in paths], normalize_embeddings=True)
    urls = ["data:image/jpeg;base64," + base64.b64encode(p.read_bytes()).decode() for p in paths]
    for forms in (paths, [p.read_bytes() for p in paths], urls):
        np.testing.assert_allclose(engine.embed_array(forms), want, atol=1e-5)
    # a PIL image the caller opened is embedded as given, as sentence-transformers embeds it
    as_given = reference.encode([PIL.open(p) for p in paths], normalize_embeddings=True)
    np.testing.assert_allclose(engine.embed_array([PIL.open(p) for p in paths]), as_given, atol=1e-5)


def test_async_calls_decode_images_off_the_event_loop(
    engine: Engine, reference, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding and preparing an image takes milliseconds: an async call never does it on the loop."""
    import asyncio
    import threading

    from poolrag.tokenization.images import ImagePreprocessor

    threads: set[int] = set()
    real = ImagePreprocessor.request

    def recording(self, value, params, name):  # type: ignore[no-untyped-def]
        threads.add(threading.get_ident())
        return real(self, value, params, name)

    monkeypatch.setattr(ImagePreprocessor, "request", recording)

    async def main() -> tuple[int, np.ndarray]:
        return threading.get_ident(), await engine.aembed_array([PHOTOS[0]])

    loop_thread, got = asyncio.run(main())
    assert threads and loop_thread not in threads
    np.testing.assert_allclose(got, reference[1][:1], atol=1e-5)


def test_a_fast_mode_is_measured_on_images_too(clip: Path, reference) -> None:
    """bf16 changes both towers: its accuracy is measured on probe images as well as texts."""
    engine = Engine(clip, cpu_fast_mode="bf16", cpu_fast_mode_min_cosine=0.9)
    report = engine.fast_mode_report
    assert report is not None and "probe images" in report.reason
    if report.active:
        cosines = (engine.embed_array(PHOTOS) * reference[1]).sum(-1)
        assert cosines.min() >= 0.9


def test_compile_says_in_one_line_that_a_dual_encoder_has_no_graph(clip: Path) -> None:
    engine = Engine(clip, compile="background")
    report = engine.wait_for_compile(60)
    assert report is not None and report.state == "eager" and "dual encoder" in report.reason
    assert engine.embed_array(PHOTOS[:1]).shape == (1, 16)


def test_late_chunking_is_refused_for_what_a_dual_encoder_is(engine: Engine) -> None:
    """CLIP pools one token of each tower; the refusal said "pools by CLS"."""
    assert not engine.supports_late_chunking
    with pytest.raises(InvalidInputError, match="embeds texts and images by one pooled token"):
        engine.embed_chunks("a photo of a cat. a photo of a dog.", [(0, 17), (18, 35)])


def test_a_call_s_images_are_prepared_on_threads_and_the_first_bad_one_is_the_error(
    engine: Engine, reference, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding and resizing run in Pillow's C code without the GIL: a call's images are prepared
    side by side, off the caller's thread, and give the same vectors in the same order."""
    import threading

    from poolrag.tokenization import images

    seen: list[str] = []
    prepare = images.ImagePreprocessor.request

    def recording(self, value, params, name):  # type: ignore[no-untyped-def]
        seen.append(threading.current_thread().name)
        return prepare(self, value, params, name)

    monkeypatch.setattr(images.ImagePreprocessor, "request", recording)
    twice = engine.embed_array([*PHOTOS, *PHOTOS])
    np.testing.assert_allclose(twice, np.vstack([reference[1]] * 2), atol=1e-5)
    assert len(seen) == 2 * len(PHOTOS)
    if images.PREPARING_THREADS > 1:
        assert all(name.startswith("poolrag-images") for name in seen)
    with pytest.raises(InvalidInputError, match=r"input\[1\]: not a readable image"):
        engine.embed_array([PHOTOS[0], b"not a picture", b"\x89PNG broken too"])


def test_the_model_starts_on_a_call_s_first_images_while_the_rest_are_prepared(
    engine: Engine, reference, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's images go to the model a part at a time (``READY_PART``) as they are prepared, so the
    forward passes of the first ones overlap the preparation of the rest; the answers are the same,
    in order, sync and async, and the first bad image in order is still the error."""
    import asyncio
    import threading
    import time

    from poolrag.core.executor import READY_PART
    from poolrag.testing import engine_internals
    from poolrag.tokenization import images

    if images.PREPARING_THREADS == 1:
        pytest.skip("one CPU: images are prepared on the caller's thread, there is nothing to overlap")
    count = 2 * READY_PART + 3
    prepare = images.ImagePreprocessor.request
    events: list[tuple[str, float]] = []
    lock = threading.Lock()

    def slow_last(self, value, params, name):  # type: ignore[no-untyped-def]
        request = prepare(self, value, params, name)
        if name == f"input[{count - 1}]":
            time.sleep(1.0)  # the last image takes long to prepare
            with lock:
                events.append(("last prepared", time.perf_counter()))
        return request

    runner = engine_internals.executor(engine).runner  # when the model runs, not what it does
    forward = runner.run_prepared

    def recording_forward(batch, inputs):  # type: ignore[no-untyped-def]
        with lock:
            events.append(("forward", time.perf_counter()))
        return forward(batch, inputs)

    monkeypatch.setattr(images.ImagePreprocessor, "request", slow_last)
    monkeypatch.setattr(runner, "run_prepared", recording_forward)
    inputs = [PHOTOS[i % len(PHOTOS)] for i in range(count)]
    want = np.stack([reference[1][i % len(PHOTOS)] for i in range(count)])
    np.testing.assert_allclose(engine.embed_array(inputs), want, atol=1e-5)
    last = next(t for what, t in events if what == "last prepared")
    assert min(t for what, t in events if what == "forward") < last  # the model did not wait for it

    events.clear()
    got = asyncio.run(engine.aembed_array(inputs))
    np.testing.assert_allclose(got, want, atol=1e-5)
    outputs = engine.embed(inputs)  # each output names its own image's tokens, in order
    assert [o.num_tokens for o in outputs] == [17] * count

    broken = [*inputs[:40], b"not a picture", *inputs[41:]]
    with pytest.raises(InvalidInputError, match=r"input\[40\]: not a readable image"):
        engine.embed_array(broken)


def test_a_long_call_holds_a_bounded_number_of_images_pixels(
    clip: Path, reference, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's images are prepared a few ahead of the model and an answered one lets its pixels
    go: the pixels alive at any forward pass do not grow with the call (2,048 tiny PNGs held 1.2 GB
    at CLIP's 224 x 224 when all were prepared at once), and the outputs are the same."""
    import gc
    import weakref

    from poolrag.core.executor import QUEUED_BATCHES, READY_PART
    from poolrag.testing import engine_internals
    from poolrag.tokenization import images

    if images.PREPARING_THREADS == 1:
        pytest.skip("one CPU: images are prepared one by one on the caller's thread")
    engine = Engine(clip, max_batch_tokens=17 * 8)  # 8 images (17 patches each) a batch
    prepare = images.ImagePreprocessor.request
    pixels: list[weakref.ref[np.ndarray]] = []
    most = 0

    def tracked(self, value, params, name):  # type: ignore[no-untyped-def]
        request = prepare(self, value, params, name)
        pixels.append(weakref.ref(request.pixels.values))
        return request

    runner = engine_internals.executor(engine).runner
    forward = runner.run_prepared

    def counting_forward(batch, inputs):  # type: ignore[no-untyped-def]
        nonlocal most
        gc.collect()
        most = max(most, sum(ref() is not None for ref in pixels))
        return forward(batch, inputs)

    monkeypatch.setattr(images.ImagePreprocessor, "request", tracked)
    monkeypatch.setattr(runner, "run_prepared", counting_forward)
    count = 20 * READY_PART
    inputs = [PHOTOS[i % len(PHOTOS)] for i in range(count)]
    outputs = engine.embed(inputs)
    want = np.stack([reference[1][i % len(PHOTOS)] for i in range(count)])
    np.testing.assert_allclose(np.stack([o.outputs.embedding for o in outputs]), want, atol=1e-5)
    assert [o.num_tokens for o in outputs] == [17] * count  # an answered image still counts its patches
    queued = QUEUED_BATCHES * 8  # images the core may hold
    bound = queued + READY_PART + images.PREPARED_AHEAD + images.PREPARING_THREADS
    assert 0 < most <= bound < count // 4


def test_a_sentence_transformers_clip_folder_gets_its_vectors(
    tmp_path: Path, clip: Path, engine: Engine
) -> None:
    """clip-ViT-B-32's layout: ``modules.json`` naming one ``sentence_transformers.models.CLIPModel``
    module in ``0_CLIPModel/`` (it was refused as "not supported"). Without a Normalize module the
    vectors are the model's raw features, as sentence-transformers gives them."""
    import json
    import shutil

    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "clip-st"
    shutil.copytree(clip, folder / "0_CLIPModel")
    module = {"idx": 0, "name": "0", "path": "0_CLIPModel", "type": "sentence_transformers.models.CLIPModel"}
    (folder / "modules.json").write_text(json.dumps([module]))
    reference = SentenceTransformer(str(folder), device="cpu")
    ours = Engine(folder)
    np.testing.assert_allclose(
        ours.embed_array(PHOTOS), reference.encode([PIL.open(p) for p in PHOTOS]), atol=1e-5
    )
    np.testing.assert_allclose(ours.embed_array(SENTENCES), reference.encode(SENTENCES), atol=1e-5)
    normalized = ours.embed_array(PHOTOS, PoolingParams(normalize=True))
    np.testing.assert_allclose(normalized, engine.embed_array(PHOTOS), atol=1e-5)
