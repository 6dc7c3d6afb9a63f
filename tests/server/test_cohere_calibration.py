"""int8/uint8 on ``/v2/embed`` with fixed ranges: the server's ``--calibration`` file or the model
folder's own ``quantization_ranges.json``, so one text works and its bytes do not depend on the batch."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import cohere
import httpx
import numpy as np
import pytest

from poolrag import Engine, PoolingParams
from poolrag.cli import main
from poolrag.postprocess.quantization_ranges import RANGES_FILE, QuantizationRanges
from poolrag.postprocess.vector_precision import quantize_vectors

from .conftest import Served, _free_port, cli_server, serve_in_thread

QUERY = "Which organelle produces energy in cells?"
TEXTS = ["The cat sat on the mat.", QUERY, "Paris is the capital of France."]
CALIBRATION = [
    "The mitochondrion is the powerhouse of the cell, producing ATP.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose.",
    "A hash table maps keys to values using a hash function.",
    "The Pacific Ocean is the largest and deepest ocean on Earth.",
    "Bread is baked from flour, water, yeast and salt.",
]
DOCUMENT = PoolingParams(input_type="document")


def _ranges(engine: Engine, path: Path) -> QuantizationRanges:
    vectors = engine.embed_array(CALIBRATION, DOCUMENT)
    QuantizationRanges.from_vectors({vectors.shape[1]: vectors}, engine.model_identity).save(path)
    return QuantizationRanges.load(path)


def _compact(
    url: str, model: str, texts: list[str], kinds: tuple[str, ...] = ("int8",)
) -> dict[str, np.ndarray]:
    client = cohere.ClientV2(base_url=url, api_key="unused", timeout=120)
    answer = client.embed(
        texts=texts, model=model, input_type="search_document", embedding_types=list(kinds)
    ).embeddings
    return {kind: np.array(getattr(answer, kind)) for kind in kinds}


@pytest.fixture(scope="module")
def calibrated_server(
    minilm_path: Path, minilm_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, QuantizationRanges]]:
    """``poolrag serve MINILM --calibration FILE`` in a process of its own."""
    folder = tmp_path_factory.mktemp("calibrated")
    ranges = _ranges(minilm_engine, folder / "minilm-ranges.json")
    args = ["--served-model-name", "minilm", "--calibration", str(folder / "minilm-ranges.json")]
    with cli_server(folder / "server.log", str(minilm_path), *args) as (url, _):
        yield Served(url, "minilm", minilm_engine), ranges


def test_one_text_in_int8_and_uint8_is_scaled_by_the_servers_file(calibrated_server) -> None:
    served, ranges = calibrated_server
    got = _compact(served.url, served.model, [QUERY], ("int8", "uint8"))
    offline = served.engine.embed_array([QUERY], DOCUMENT)
    for kind in ("int8", "uint8"):
        np.testing.assert_array_equal(got[kind], quantize_vectors(offline, kind, ranges=ranges))


def test_a_texts_bytes_are_the_same_alone_and_in_any_batch(calibrated_server) -> None:
    served, _ = calibrated_server
    alone = _compact(served.url, served.model, [QUERY])["int8"]
    batched = _compact(served.url, served.model, TEXTS)["int8"]
    np.testing.assert_array_equal(batched[1:2], alone)


def test_a_request_calibration_set_still_wins(calibrated_server, http: httpx.Client) -> None:
    served, _ = calibrated_server
    own = served.engine.embed_array(TEXTS, DOCUMENT)
    answer = http.post(
        f"{served.url}/v2/embed",
        json={
            "texts": [QUERY],
            "embedding_types": ["int8"],
            "input_type": "search_document",
            "calibration": own.tolist(),
        },
    )
    assert answer.status_code == 200, answer.text
    offline = served.engine.embed_array([QUERY], DOCUMENT)
    expected = quantize_vectors(offline, "int8", calibration=own)
    np.testing.assert_array_equal(np.array(answer.json()["embeddings"]["int8"]), expected)


def test_a_matryoshka_width_the_file_lacks_is_a_400_naming_the_flag_before_the_model_runs(
    matryoshka_engine: Engine, tmp_path: Path, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ranges(matryoshka_engine, tmp_path / "full-width.json")  # 384 only
    embedded: list[object] = []
    real = matryoshka_engine.aembed

    async def counting(prompts, *args, **kwargs):
        embedded.append(prompts)
        return await real(prompts, *args, **kwargs)

    monkeypatch.setattr(matryoshka_engine, "aembed", counting)
    with serve_in_thread(matryoshka_engine, calibration=str(tmp_path / "full-width.json")) as url:
        body = {"texts": [QUERY], "embedding_types": ["int8"], "output_dimension": 128}
        answer = http.post(f"{url}/v2/embed", json=body)
        assert http.post(f"{url}/v2/embed", json={**body, "output_dimension": 384}).status_code == 200
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert "for 384 dimensions, not 128" in message and "--dimensions 128" in message
    assert str(tmp_path) not in message  # the server's file is not the client's business
    assert len(embedded) == 1  # only the request it could answer ran the model


@pytest.fixture
def folder_with_ranges(tiny_model: Callable[..., Path], tmp_path: Path) -> Path:
    """A model folder that ships ``quantization_ranges.json``, written by ``poolrag calibrate``."""
    folder = Path(shutil.copytree(tiny_model("bert"), tmp_path / "tiny-with-ranges"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in CALIBRATION))
    assert main(["calibrate", str(corpus), "--model", str(folder), "--out", str(folder / RANGES_FILE)]) == 0
    return folder


def test_the_model_folders_own_ranges_are_the_default(folder_with_ranges: Path) -> None:
    engine = Engine(str(folder_with_ranges))
    shipped = QuantizationRanges.load(folder_with_ranges / RANGES_FILE)
    with serve_in_thread(engine, served_model_names=("tiny",)) as url:
        got = _compact(url, "tiny", [QUERY])["int8"]
    np.testing.assert_array_equal(
        got, quantize_vectors(engine.embed_array([QUERY], DOCUMENT), "int8", ranges=shipped)
    )


def test_without_any_ranges_one_text_is_a_400_saying_how_to_fix_it(
    tiny_model: Callable[..., Path], http: httpx.Client
) -> None:
    engine = Engine(str(tiny_model("bert")))
    with serve_in_thread(engine, served_model_names=("tiny",)) as url:
        answer = http.post(f"{url}/v2/embed", json={"texts": [QUERY], "embedding_types": ["uint8"]})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "calibration"
    assert "--calibration FILE" in error["message"] and "poolrag calibrate" in error["message"]


NO_WIDTH_OF_THE_MODEL = json.dumps(
    {
        "format": "poolrag-quantization-ranges",
        "version": 1,
        "model": "",
        "ranges": {"3": {"min": [0, 0, 0], "max": [1, 1, 1]}},
    }
)


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": "other"}), NO_WIDTH_OF_THE_MODEL])
def test_serve_with_a_bad_ranges_file_is_one_line_and_exit_2(
    tiny_model: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    bad = tmp_path / "ranges.json"
    bad.write_text(content)
    folder = tiny_model("bert")
    capsys.readouterr()  # what building the folder printed (transformers' progress) is not the command's
    code = main(["serve", str(folder), "--calibration", str(bad), "--port", str(_free_port())])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("poolrag serve: cannot start:") and str(bad) in err and "\n" not in err


def test_one_calibration_file_serves_an_embedder_beside_a_reranker(
    minilm_path: Path,
    minilm_engine: Engine,
    cross_encoder_path: Path,
    cross_encoder_engine: Engine,
    tmp_path: Path,
) -> None:
    """``poolrag serve EMBEDDER RERANKER --calibration FILE``: the flag applies to every model, and
    a model that gives no embeddings never scales any, so the file is the embedder's alone."""
    ranges = _ranges(minilm_engine, tmp_path / "minilm-ranges.json")
    args = [str(minilm_path), str(cross_encoder_path), "--served-model-name", "minilm", "reranker"]
    with cli_server(
        tmp_path / "server.log", *args, "--calibration", str(tmp_path / "minilm-ranges.json")
    ) as (
        url,
        _,
    ):
        got = _compact(url, "minilm", [QUERY])["int8"]
        offline = minilm_engine.embed_array([QUERY], DOCUMENT)
        np.testing.assert_array_equal(got, quantize_vectors(offline, "int8", ranges=ranges))
        reranked = httpx.post(
            f"{url}/v2/rerank", json={"model": "reranker", "query": QUERY, "documents": TEXTS}, timeout=120
        )
    assert reranked.status_code == 200, reranked.text
    scores = {row["index"]: row["relevance_score"] for row in reranked.json()["results"]}
    expected = [out.outputs.score for out in cross_encoder_engine.score(QUERY, TEXTS)]
    np.testing.assert_allclose([scores[i] for i in range(len(TEXTS))], expected, atol=1e-5)
