"""Images cross HTTP as data URLs: ``PoolragClient`` sends a path, bytes or a PIL image that way, a
served CLIP reads a data URL in ``/v1/embeddings``' ``input`` as the image, and both equal the
engine's vectors (the ``openai`` package sends the same body)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine
from poolrag.client import PoolragClient
from poolrag.errors import InvalidImageError
from poolrag.testing.live_server import serve
from poolrag.testing.page_corpus import oriented_photo
from poolrag.testing.tiny_models import build_clip

PIL = pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")
PHOTO = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Engine:
    return Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))


@pytest.fixture(scope="module")
def url(engine: Engine) -> Iterator[str]:
    yield from serve(engine, "clip")


def test_the_client_sends_images_the_engine_reads(engine: Engine, url: str) -> None:
    inputs = [PHOTO, "a portrait", PHOTO.read_bytes(), PIL.open(PHOTO).convert("RGB")]
    client = PoolragClient(url)
    try:
        got = client.embed_array(inputs)
    finally:
        client.close()
    want = engine.embed_array([PHOTO, "a portrait", PHOTO, PHOTO])
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_every_client_call_takes_the_images_the_engine_takes(engine: Engine, url: str) -> None:
    """score, score_array, rerank and encode send a path, bytes or a PIL image as embed_array does
    (seen from outside: a raw 'PosixPath is not JSON serializable' TypeError)."""
    images = [PHOTO, PHOTO.read_bytes(), PIL.open(PHOTO).convert("RGB")]
    want = engine.score_array("a portrait", [PHOTO, PHOTO, PHOTO])
    client = PoolragClient(url)
    try:
        np.testing.assert_allclose(client.score_array("a portrait", images), want, atol=1e-6)
        scores = [out.outputs.score for out in client.score("a portrait", images)]
        np.testing.assert_allclose(scores, want, atol=1e-6)
        ranked = client.rerank("a portrait", [*images, "tax law"])
        assert sorted(r.index for r in ranked) == [0, 1, 2, 3]
        outputs = client.encode(images, pooling_task="embed")
        assert [(o.prompt, o.prompt_token_ids) for o in outputs] == [(None, [])] * 3  # no text to echo
        np.testing.assert_allclose(
            np.stack([o.outputs.data for o in outputs]), engine.embed_array([PHOTO] * 3), atol=1e-6
        )
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["P", "PA", "LAB", "RGBA", "LA", "CMYK", "I;16"])
def test_a_pil_image_of_any_mode_gets_its_in_process_vector_remotely(
    engine: Engine, url: str, mode: str
) -> None:
    """A PIL image crosses as the RGB pixels the engine reads from it. Saved as a PNG in its own
    mode, a palette image with an RGBA palette (what ``convert("P")`` or ``quantize`` of a
    transparent picture gives) came back with its alpha as tRNS and was shown on white, which the
    engine and transformers do not do; a ``PA`` or ``LAB`` picture lost its alpha band."""
    rgba = PIL.open(PHOTO).convert("RGBA").resize((96, 64))
    rgba.putalpha(PIL.linear_gradient("L").resize(rgba.size))
    picture = rgba.convert(mode)
    with PoolragClient(url) as client:
        np.testing.assert_allclose(client.embed_array([picture]), engine.embed_array([picture]), atol=1e-6)


@pytest.mark.parametrize("image", ["missing", "folder", "no pixels"])
def test_an_image_the_client_cannot_send_is_refused_as_the_engine_refuses_it(
    engine: Engine, url: str, tmp_path: Path, image: str
) -> None:
    """Read on the caller's side, a path or a PIL image fails there: in the engine's words and by
    the caller's index, not as a raw FileNotFoundError or Pillow's 'cannot write empty image'."""
    bad = {"missing": tmp_path / "gone.png", "folder": tmp_path, "no pixels": PIL.new("RGB", (0, 4))}[image]
    inputs = ["a portrait", PHOTO, bad]
    with pytest.raises(InvalidImageError) as in_process:
        engine.embed_array(inputs)
    with PoolragClient(url) as client, pytest.raises(InvalidImageError) as remote:
        client.embed_array(inputs)
    assert str(remote.value) == str(in_process.value) and str(remote.value).startswith("input[2]: ")


def test_openai_s_client_posts_a_data_url_and_gets_the_image_s_vector(engine: Engine, url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    data_url = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    with client:
        answer = client.embeddings.create(model="clip", input=[data_url, "a portrait"])
    got = np.array([row.embedding for row in answer.data], dtype=np.float32)
    np.testing.assert_allclose(got, engine.embed_array([PHOTO, "a portrait"]), atol=1e-6)


def _message(*parts: dict[str, object]) -> dict[str, object]:
    return {"role": "user", "content": list(parts)}


def test_vllm_s_chat_messages_embed_their_one_image_or_text(engine: Engine, url: str) -> None:
    """vLLM's multimodal embedding form: ``messages`` with an ``image_url`` (or a text) part, one
    vector per request, the engine's own."""
    import httpx

    data_url = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    bodies = [
        {"model": "clip", "messages": [_message({"type": "image_url", "image_url": {"url": data_url}})]},
        {"model": "clip", "messages": [_message({"type": "text", "text": "a portrait"})]},
        {"model": "clip", "messages": [{"role": "user", "content": "a portrait"}]},
    ]
    got, usage = [], []
    for body in bodies:
        answer = httpx.post(f"{url}/v1/embeddings", json=body)
        assert answer.status_code == 200, answer.text
        [row] = answer.json()["data"]
        got.append(row["embedding"])
        usage.append(answer.json()["usage"]["prompt_tokens"])
    want = engine.embed_array([PHOTO, "a portrait", "a portrait"])
    np.testing.assert_allclose(np.array(got, dtype=np.float32), want, atol=1e-6)
    assert usage[0] == 17  # the image's patches and class token, as vLLM counts its image tokens


def test_vllm_s_pooling_route_takes_the_chat_form_too(engine: Engine, url: str) -> None:
    import httpx

    data_url = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    image = _message({"type": "image_url", "image_url": {"url": data_url}})
    answer = httpx.post(f"{url}/pooling", json={"model": "clip", "task": "embed", "messages": [image]})
    assert answer.status_code == 200, answer.text
    [row] = answer.json()["data"]
    np.testing.assert_allclose(
        np.array([row["data"]], dtype=np.float32), engine.embed_array([PHOTO]), atol=1e-6
    )
    unreadable = _message({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    refused = httpx.post(f"{url}/pooling", json={"task": "embed", "messages": [unreadable]})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("messages[0].content[0]: not a readable image")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            {"messages": [_message({"type": "text", "text": "a"}, {"type": "text", "text": "b"})]},
            "messages hold 2 parts: this model embeds one text or one image per request",
        ),
        (
            {
                "messages": [
                    _message({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
                ]
            },
            "messages[0].content[0].image_url.url must be a data:image/...;base64, URL (nothing is fetched)",
        ),
        ({"messages": [_message()]}, "messages hold 0 parts"),
        ({"input": "a", "messages": [{"role": "user", "content": "a"}]}, "send input or messages"),
    ],
)
def test_messages_a_model_cannot_read_are_a_400_saying_why(url: str, body: dict, problem: str) -> None:
    import httpx

    answer = httpx.post(f"{url}/v1/embeddings", json=body)
    assert answer.status_code == 400 and problem in answer.text, answer.text


def test_an_unreadable_image_in_messages_is_a_400_naming_its_part(url: str) -> None:
    import httpx

    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = {"messages": [{"role": "system", "content": []}, _message(part)]}
    answer = httpx.post(f"{url}/v1/embeddings", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith("messages[1].content[0]: not a readable image")


def test_an_unreadable_image_is_a_400_naming_it(url: str) -> None:
    import httpx

    response = httpx.post(f"{url}/v1/embeddings", json={"input": ["a text", "data:image/png;base64,AAAA"]})
    assert response.status_code == 400
    assert "input[1]: not a readable image" in response.text


def test_a_jina_image_may_be_a_data_url_or_the_files_bare_base64(engine: Engine, url: str) -> None:
    import httpx

    encoded = base64.b64encode(PHOTO.read_bytes()).decode()
    body = {"input": [{"image": encoded}, {"image": f"data:image/jpeg;base64,{encoded}"}, {"text": "a"}]}
    answer = httpx.post(f"{url}/v1/embeddings", json=body)
    assert answer.status_code == 200, answer.text
    got = np.array([row["embedding"] for row in answer.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, engine.embed_array([PHOTO, PHOTO, "a"]), atol=1e-6)
    for address in ("https://example.com/cat.png", "file:///etc/hostname", "not base64!"):
        refused = httpx.post(f"{url}/v1/embeddings", json={"input": [{"image": address}]})
        assert refused.status_code == 400 and "nothing is fetched" in refused.text


def test_tei_similarity_names_an_unreadable_image_by_its_own_fields(url: str) -> None:
    import httpx

    photo = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    for inputs, named in [
        (
            {"source_sentence": "a portrait", "sentences": [photo, "data:image/png;base64,AAAA"]},
            "sentences[1]",
        ),
        ({"source_sentence": "data:image/png;base64,AAAA", "sentences": [photo]}, "source_sentence"),
    ]:
        response = httpx.post(f"{url}/similarity", json={"inputs": inputs})
        assert response.status_code == 422, response.text
        assert response.json()["error"].startswith(f"inputs.{named}: not a readable image")


def test_a_text_only_server_is_never_sent_an_image(tmp_path_factory, minilm_path: Path) -> None:
    """A text-only model would read a data URL as text: the client refuses the image as the engine does."""
    import httpx

    from poolrag.errors import InputTypeError
    from poolrag.testing.tiny_models import build_encoder

    engine = Engine(build_encoder(tmp_path_factory.mktemp("bert"), "bert", minilm_path))
    for url in serve(engine, "bert"):
        client = PoolragClient(url)
        try:
            assert client.facts.reads_images is False
            with pytest.raises(InputTypeError, match=r"input\[1\]: this model reads text only, not images"):
                client.embed_array(["a text", PHOTO])
            chat = {"messages": [{"role": "user", "content": "a text"}]}
            refused_chat = httpx.post(f"{url}/v1/embeddings", json=chat)
            assert refused_chat.status_code == 400 and "poolrag applies no chat template" in refused_chat.text
            cohere_body = {"images": ["data:image/png;base64,AAAA"], "input_type": "image"}
            refused = httpx.post(f"{url}/v2/embed", json=cohere_body)
            assert refused.status_code == 400 and "reads text only" in refused.text
        finally:
            client.close()


def test_cohere_s_client_embeds_images_through_v2_embed(engine: Engine, url: str) -> None:
    import cohere

    data_url = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    client = cohere.ClientV2(base_url=url, api_key="unused", timeout=120)
    answer = client.embed(model="clip", images=[data_url], input_type="image", embedding_types=["float"])
    got = np.array(answer.embeddings.float_, dtype=np.float32)
    np.testing.assert_allclose(got, engine.embed_array([PHOTO]), atol=1e-6)


def test_cohere_s_client_embeds_mixed_inputs_one_text_or_image_each(engine: Engine, url: str) -> None:
    """Cohere's ``inputs`` form (embed-v4's): each item's content is one part here, a text or an
    image, in the call's order; an item fusing a text and an image is refused, naming it."""
    import cohere
    import httpx

    data_url = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode()
    image = {"type": "image_url", "image_url": {"url": data_url}}
    text = {"type": "text", "text": "a portrait"}
    client = cohere.ClientV2(base_url=url, api_key="unused", timeout=120)
    answer = client.embed(
        model="clip",
        inputs=[{"content": [image]}, {"content": [text]}],
        input_type="search_document",
        embedding_types=["float"],
    )
    got = np.array(answer.embeddings.float_, dtype=np.float32)
    np.testing.assert_allclose(got, engine.embed_array([PHOTO, "a portrait"]), atol=1e-6)
    fused = {"inputs": [{"content": [text]}, {"content": [text, image]}], "input_type": "search_document"}
    refused = httpx.post(f"{url}/v2/embed", json=fused)
    assert refused.status_code in (400, 422)
    assert "inputs[1].content has 2 parts: this model embeds one text or one image per input" in refused.text


def test_v2_embed_takes_texts_or_images_and_fetches_nothing(url: str) -> None:
    import httpx

    both = {"texts": ["a"], "images": ["data:image/png;base64,AAAA"], "input_type": "image"}
    remote = {"images": ["https://example.com/cat.png"], "input_type": "image"}
    for body, message in ((both, "texts, images or inputs"), (remote, "nothing is fetched")):
        response = httpx.post(f"{url}/v2/embed", json=body)
        assert response.status_code in (400, 422) and message in response.text


def test_int8_of_one_image_without_ranges_names_the_image(url: str) -> None:
    """The refusal says what was sent (seen from outside: one image was called 'a single text')."""
    import httpx

    image = "data:image/jpeg;base64," + base64.b64encode(PHOTO.read_bytes()).decode("ascii")
    body = {"images": [image], "input_type": "image", "embedding_types": ["int8"]}
    response = httpx.post(f"{url}/v2/embed", json=body)
    assert response.status_code == 400
    assert "int8/uint8 of a single image needs fixed ranges" in response.json()["error"]["message"]


def test_a_phone_photo_is_upright_over_http_and_a_pil_one_as_given(
    engine: Engine, url: str, tmp_path: Path
) -> None:
    """A JPEG with an EXIF orientation sent as a data URL is embedded upright by the server, as
    sentence-transformers embeds its path; a PIL image opened from it crosses as the pixels it
    holds (a PNG without the tag) and is embedded as given, remotely as in-process."""
    from sentence_transformers import SentenceTransformer

    paths = [oriented_photo(tmp_path / f"photo-{o}.jpg", o) for o in (None, 3, 6, 8)]
    reference = SentenceTransformer(str(engine.model_folder), device="cpu")
    upright = reference.encode([{"image": str(p)} for p in paths], normalize_embeddings=True)
    urls = ["data:image/jpeg;base64," + base64.b64encode(p.read_bytes()).decode() for p in paths]
    answer = httpx.post(f"{url}/v1/embeddings", json={"model": "clip", "input": urls}, timeout=60)
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose([row["embedding"] for row in answer.json()["data"]], upright, atol=1e-5)
    with PoolragClient(url) as client:
        np.testing.assert_allclose(client.embed_array(paths), upright, atol=1e-5)
        remote = client.embed_array([PIL.open(p) for p in paths])
    as_given = engine.embed_array([PIL.open(p) for p in paths])
    np.testing.assert_allclose(remote, as_given, atol=1e-6)
    assert np.abs(as_given[1:] - upright[1:]).max(axis=1).min() > 1e-3  # on its side: another vector
