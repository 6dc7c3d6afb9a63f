"""``poolrag ingest --vector-type float16|uint8``: the store holds exactly the bytes ``poolrag serve``
sends for the same chunks (``/v1/embeddings`` with ``embed_dtype=float16``; ``/v2/embed`` uint8 with
the same ``--calibration`` file), ``poolrag search`` still finds the right chunk, and every way to get
it wrong is one line."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import cohere
import httpx
import numpy as np
import pytest

from poolrag import Engine
from poolrag.cli import main
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.server import ServerSettings, create_app
from poolrag.stores import open_store
from poolrag.testing.live_server import LiveServer
from poolrag.testing.store_internals import raw_points
from poolrag.testing.tiny_models import write_sentence_transformers

DOCUMENTS = {
    "bees.txt": "Honeybees tell each other where flowers are with a waggle dance.",
    "tides.txt": "The Moon's gravity pulls the oceans into two tidal bulges every day.",
    "sourdough.txt": "Sourdough rises thanks to wild yeast and lactic acid bacteria in the starter.",
    "rust.txt": "Rust's borrow checker forbids data races at compile time.",
    "coral.txt": "Coral bleaching happens when corals expel the algae living in their tissues.",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text)
    return folder


def _ingest(corpus: Path, root: Path, minilm_path: Path, store: str, *extra: str) -> int:
    location = ["--uri", str(root / "m.db")] if store == "milvus" else ["--path", str(root / store)]
    args = ["ingest", str(corpus), "--model", str(minilm_path), "--store", store, *location]
    return main([*args, "--collection", "docs", "--cache", str(root / "cache.sqlite"), "-q", *extra])


def _served(engine: Engine, **settings: object) -> LiveServer:
    """``poolrag serve``'s app for ``engine`` on 127.0.0.1, as ``minilm``."""
    return LiveServer(create_app(engine, ServerSettings(served_model_names=("minilm",), **settings)))


def _stored(root: Path, store: str) -> dict[str, np.ndarray]:
    """Chunk text -> the vector the database holds, read with the database's own client."""
    opened = open_store(store, "docs", path=str(root / store))
    try:
        return {payload["text"]: vector for vector, payload in raw_points(opened).values()}
    finally:
        opened.close()


@pytest.mark.parametrize("store", ["qdrant", "qdrant-edge"])
def test_uint8_chunks_are_the_servers_uint8_bytes_and_search_finds_them(
    store: str, corpus: Path, tmp_path: Path, minilm_path: Path, minilm_engine: Engine, capsys
) -> None:
    ranges = tmp_path / "ranges.json"
    assert main(["calibrate", str(corpus), "--model", str(minilm_path), "--out", str(ranges)]) == 0
    assert (
        _ingest(corpus, tmp_path, minilm_path, store, "--vector-type", "uint8", "--calibration", str(ranges))
        == 0
    )
    stored = _stored(tmp_path, store)
    texts = sorted(stored)
    assert texts == sorted(DOCUMENTS.values())
    with _served(minilm_engine, calibration=str(ranges)) as live:
        client = cohere.ClientV2(base_url=live.url, api_key="unused", timeout=120)
        answer = client.embed(
            texts=texts, model="minilm", input_type="search_document", embedding_types=["uint8"]
        )
    np.testing.assert_array_equal(np.array([stored[t] for t in texts]), np.array(answer.embeddings.uint8))

    capsys.readouterr()
    search = ["search", "how do I keep a sourdough starter alive?", "--model", str(minilm_path)]
    assert (
        main([*search, "--store", store, "--path", str(tmp_path / store), "--collection", "docs", "--json"])
        == 0
    )
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits[0]["source"].endswith("sourdough.txt")
    assert 0.3 < hits[0]["score"] <= 1.0  # a cosine, not a dot product of buckets


def _matryoshka_model(tiny_model, tmp_path: Path) -> Path:
    """A tiny normalising model of 32 dimensions, to be cut with ``--assume-matryoshka``."""
    folder = shutil.copytree(tiny_model("bert"), tmp_path / "model")
    return write_sentence_transformers(folder, dense_out=32, normalize=True)


def test_matryoshka_uint8_chunks_are_the_servers_bytes_for_that_output_dimension(
    corpus: Path, tmp_path: Path, tiny_model, caplog: pytest.LogCaptureFixture
) -> None:
    """``ingest --dimensions`` cuts cached full vectors, the server's ``output_dimension`` the engine's:
    the same bytes, and ranges calibrated on these documents hold every value (no clipping said)."""
    model = _matryoshka_model(tiny_model, tmp_path)
    ranges = tmp_path / "ranges.json"
    matryoshka = ("--assume-matryoshka", "--dimensions", "16")
    assert main(["calibrate", str(corpus), "--model", str(model), *matryoshka, "--out", str(ranges)]) == 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="poolrag.stores.vector_types"):
        ingested = _ingest(
            corpus,
            tmp_path,
            model,
            "qdrant-edge",
            *matryoshka,
            "--vector-type",
            "uint8",
            "--calibration",
            str(ranges),
        )
    assert ingested == 0
    assert not [r for r in caplog.records if "outside the uint8 ranges" in r.getMessage()]
    stored = _stored(tmp_path, "qdrant-edge")
    texts = sorted(stored)
    engine = Engine(model, hf_overrides={"is_matryoshka": True})
    with _served(engine, calibration=str(ranges)) as live:
        client = cohere.ClientV2(base_url=live.url, api_key="unused", timeout=120)
        answer = client.embed(
            texts=texts,
            model="minilm",
            input_type="search_document",
            embedding_types=["uint8"],
            output_dimension=16,
        )
    np.testing.assert_array_equal(np.array([stored[t] for t in texts]), np.array(answer.embeddings.uint8))


@pytest.mark.parametrize(
    ("size", "said"), [(("--dimensions", "8"), "vs 8-dimension"), ((), "vs 32-dimension")]
)
def test_a_re_run_at_another_size_into_a_uint8_collection_names_the_size_it_was_written_with(
    size: tuple[str, ...], said: str, corpus: Path, tmp_path: Path, tiny_model, capsys
) -> None:
    """The collection's ranges are for its own size: the run is told its size differs (and the flags
    the collection was written with), not that those ranges have the wrong shape."""
    model = _matryoshka_model(tiny_model, tmp_path)
    ranges = tmp_path / "ranges.json"
    sizes = ("--assume-matryoshka", "--dimensions", "16", "8")
    assert main(["calibrate", str(corpus), "--model", str(model), *sizes, "--out", str(ranges)]) == 0
    written = (
        "--assume-matryoshka",
        "--dimensions",
        "16",
        "--vector-type",
        "uint8",
        "--calibration",
        str(ranges),
    )
    assert _ingest(corpus, tmp_path, model, "qdrant-edge", *written) == 0
    before = _stored(tmp_path, "qdrant-edge")
    (corpus / "extra.txt").write_text("Index funds track a market index at very low cost.")
    capsys.readouterr()
    assert _ingest(corpus, tmp_path, model, "qdrant-edge", "--assume-matryoshka", *size) == 2
    err = capsys.readouterr().err.strip()
    assert f"16-dimension vectors {said}" in err, err
    assert "it was written with --dimensions 16 --assume-matryoshka" in err and len(err.splitlines()) == 1
    assert _stored(tmp_path, "qdrant-edge").keys() == before.keys()


def test_float16_chunks_are_the_servers_float16_bytes(
    corpus: Path, tmp_path: Path, minilm_path: Path, minilm_engine: Engine
) -> None:
    assert _ingest(corpus, tmp_path, minilm_path, "qdrant-edge", "--vector-type", "float16") == 0
    stored = _stored(tmp_path, "qdrant-edge")
    texts = sorted(stored)
    with _served(minilm_engine) as live:
        body = {"model": "minilm", "input": texts, "encoding_format": "base64", "embed_dtype": "float16"}
        data = httpx.post(f"{live.url}/v1/embeddings", json=body, timeout=120).json()["data"]
    sent = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f2") for d in data]
    np.testing.assert_array_equal(np.array([stored[t] for t in texts]), np.array(sent, dtype=np.float32))


def test_a_re_run_without_the_flags_keeps_the_collections_type_and_ranges(
    corpus: Path, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    ranges = tmp_path / "ranges.json"
    assert main(["calibrate", str(corpus), "--model", str(minilm_path), "--out", str(ranges)]) == 0
    assert (
        _ingest(
            corpus,
            tmp_path,
            minilm_path,
            "qdrant-edge",
            "--vector-type",
            "uint8",
            "--calibration",
            str(ranges),
        )
        == 0
    )
    first = _stored(tmp_path, "qdrant-edge")
    (corpus / "extra.txt").write_text("Index funds track a market index at very low cost.")
    assert _ingest(corpus, tmp_path, minilm_path, "qdrant-edge") == 0  # the same command, minus the flags
    second = _stored(tmp_path, "qdrant-edge")
    assert len(second) == len(first) + 1
    for text, vector in first.items():
        np.testing.assert_array_equal(second[text], vector)
    assert set(np.unique(np.concatenate(list(second.values())))) <= set(range(256))

    capsys.readouterr()
    assert _ingest(corpus, tmp_path, minilm_path, "qdrant-edge", "--vector-type", "float16") == 2
    err = capsys.readouterr().err.strip()
    assert "uint8 vectors vs float16" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("store", "extra", "said"),
    [
        ("qdrant-edge", ("--vector-type", "uint8"), "--calibration FILE"),
        ("milvus", ("--vector-type", "float16"), "milvus stores float32 vectors, not float16"),
        ("qdrant-edge", ("--calibration", "ranges.json"), "--calibration scales uint8 vectors"),
        ("qdrant-edge", ("--vector-type", "int8"), "invalid choice: 'int8'"),
    ],
)
def test_a_wrong_vector_type_is_one_line_and_writes_nothing(
    store: str, extra: tuple[str, ...], said: str, corpus: Path, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    try:
        code = _ingest(corpus, tmp_path, minilm_path, store, *extra)
    except SystemExit as exit:  # argparse's own refusal
        code = exit.code
    assert code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # argparse prints its usage line first
    assert said in last
    if store == "milvus":
        assert not (tmp_path / "m.db").exists()  # refused before the database file is made
    else:
        assert not (tmp_path / store / "docs").exists()


@pytest.mark.parametrize("vector_type", ["float16", "uint8"])
def test_a_model_that_does_not_normalise_is_refused_before_the_store_is_made_unless_normalised(
    vector_type: str, corpus: Path, tmp_path: Path, tiny_model, capsys
) -> None:
    """Compact vectors are compared by dot product: a model's un-normalised vectors would rank by
    length times cosine (scores over 1, another order than a float32 collection's). Refused in one line
    naming the remedy, which then ranks as the float32 collection does."""
    model = write_sentence_transformers(shutil.copytree(tiny_model("bert"), tmp_path / "model"), dense_out=32)
    assert not Engine(model).facts.normalizes_embeddings
    ranges = tmp_path / "ranges.json"
    normalised = ("--pooler-config", '{"normalize": true}')
    assert main(["calibrate", str(corpus), "--model", str(model), *normalised, "--out", str(ranges)]) == 0
    compact = ("--vector-type", vector_type) + (
        ("--calibration", str(ranges)) if vector_type == "uint8" else ()
    )
    capsys.readouterr()
    assert _ingest(corpus, tmp_path, model, "qdrant-edge", *compact) == 2
    err = capsys.readouterr().err.strip()
    assert "does not normalise its embeddings" in err and """--pooler-config '{"normalize": true}'""" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "qdrant-edge").exists()

    assert _ingest(corpus, tmp_path, model, "qdrant-edge", *compact, *normalised) == 0
    search = ["search", "honeybees waggle dance", "--model", str(model), "--json", "-k", "5"]
    where = ["--store", "qdrant-edge", "--path", str(tmp_path / "qdrant-edge"), "--collection", "docs"]
    capsys.readouterr()
    assert main([*search, *normalised, *where]) == 0
    compact_hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    float_root = tmp_path / "float32"
    float_root.mkdir()
    assert _ingest(corpus, float_root, model, "qdrant-edge") == 0
    capsys.readouterr()
    assert (
        main(
            [
                *search,
                "--store",
                "qdrant-edge",
                "--path",
                str(float_root / "qdrant-edge"),
                "--collection",
                "docs",
            ]
        )
        == 0
    )
    float_hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [h["source"] for h in compact_hits] == [h["source"] for h in float_hits]
    for ours, reference in zip(compact_hits, float_hits, strict=True):
        assert ours["score"] == pytest.approx(reference["score"], abs=2e-3)  # cosines, not over 1


def test_ranges_of_another_width_are_one_line_naming_the_width(
    corpus: Path, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    ranges = tmp_path / "ranges-16.json"
    QuantizationRanges.from_vectors({16: np.eye(16, dtype=np.float32)}).save(ranges)
    code = _ingest(
        corpus, tmp_path, minilm_path, "qdrant-edge", "--vector-type", "uint8", "--calibration", str(ranges)
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    # 384 is the model's own width, which calibrate always writes: the remedy is calibrating this model
    assert "has ranges for 16 dimensions, and" in err and "gives 384: calibrate with this model" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "qdrant-edge" / "docs").exists()


def test_a_calibration_file_that_is_not_one_is_one_line_naming_it(
    corpus: Path, tmp_path: Path, minilm_path: Path, capsys
) -> None:
    bad = tmp_path / "ranges.json"
    bad.write_text("import os; os.system('echo no')")
    code = _ingest(
        corpus, tmp_path, minilm_path, "qdrant-edge", "--vector-type", "uint8", "--calibration", str(bad)
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "not a quantization ranges file" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "qdrant-edge").exists()


def test_a_colbert_model_is_told_its_token_vectors_stay_float32_not_to_normalise(
    corpus: Path, tmp_path: Path, assets: Path, capsys
) -> None:
    """ColBERT's refusal came second: the first told its user to add a normalising pooler config,
    which only led to it."""
    colbert = assets / "colbert-pylate"
    assert _ingest(corpus, tmp_path, colbert, "qdrant-edge", "--vector-type", "float16") == 2
    err = capsys.readouterr().err.strip()
    assert "ColBERT token vectors stay float32" in err and "normal" not in err, err
    assert not (tmp_path / "qdrant-edge").exists()
