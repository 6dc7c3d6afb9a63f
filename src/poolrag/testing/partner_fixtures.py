"""pytest plugin: models, live servers and helpers for the partner packages' tests.

Each package under ``integrations/`` names it in its ``tests/conftest.py``
(``pytest_plugins = ["poolrag.testing.partner_fixtures"]``), so every package tests against the same
engines, servers and corpus, with nothing taken from the repository's ``tests/`` folder. It brings
:mod:`poolrag.testing.model_fixtures` along (the offline settings, MiniLM, the built test assets).

Engines are session-scoped and shared between the in-process adapters and the servers that the
remote adapters call (``create_app`` on 127.0.0.1, a free port, uvicorn in a thread), so "remote
equals in-process" compares one model through two paths. The reranker and ColBERT tests run on
real converted models from ``scripts/build_test_assets.py``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from poolrag.params import PoolingParams
from poolrag.testing.doc_snippets import with_local_models
from poolrag.testing.rag_corpus import API_KEY

if TYPE_CHECKING:
    from poolrag.engine import Engine

# Loaded after this module: nothing above may import torch, transformers or the hub client, whose
# settings that plugin fixes first (engines and servers are imported inside the fixtures).
pytest_plugins = ["poolrag.testing.model_fixtures"]

#: What the embedding adapters send by default: the input type, and cut at the model's length.
DOC = PoolingParams(input_type="document", truncate_prompt_tokens=-1)
QUERY = PoolingParams(input_type="query", truncate_prompt_tokens=-1)

#: Hub ids the documented examples name, and the local folders the tests run instead.
DOC_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": ("minilm_path", ""),
    "cross-encoder/ms-marco-MiniLM-L-12-v2": ("assets", "ms-marco-MiniLM-L-12-v2"),
    "answerdotai/answerai-colbert-small-v1": ("assets", "colbert-pylate"),
}


async def loop_turns_until_done(work: Awaitable[object]) -> tuple[int, object]:
    """How often the event loop ran other tasks while ``work`` was running, and its result: at least
    once for an adapter that does not block the loop (a blocking one finishes in its first step)."""
    task = asyncio.ensure_future(work)
    await asyncio.sleep(0)  # the task starts
    turns = 0
    while not task.done():
        turns += 1
        await asyncio.sleep(0)
    return turns, await task


# -- model folders and engines ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def prompted_minilm_path(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM with sentence-transformers query/document prompts, to see input_type select them."""
    folder = tmp_path_factory.mktemp("prompted") / "minilm-prompted"
    shutil.copytree(minilm_path, folder)
    config_path = folder / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config["prompts"] = {"query": "query: ", "document": "passage: "}
    config_path.write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="session")
def cross_encoder_engine(assets: Path) -> Engine:
    """ms-marco-MiniLM-L-12-v2, a real cross-encoder (converted from a PyPI wheel)."""
    from poolrag.engine import Engine

    return Engine(assets / "ms-marco-MiniLM-L-12-v2")


@pytest.fixture(scope="session")
def colbert_engine(assets: Path) -> Engine:
    """A real ColBERT model in PyLate layout (96-dim token vectors)."""
    from poolrag.engine import Engine

    return Engine(assets / "colbert-pylate")


@pytest.fixture(scope="session")
def matryoshka_engine(minilm_path: Path) -> Engine:
    """MiniLM declared Matryoshka so that ``dimensions`` can be exercised."""
    from poolrag.engine import Engine

    return Engine(minilm_path, hf_overrides={"matryoshka_dimensions": [128, 256, 384]})


@pytest.fixture
def engine_calls(minilm_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every list of texts that reaches ``minilm_engine.embed_array`` during the test (the engine
    still computes them), to see how adapters batch and what a cache spares."""
    calls: list[list[str]] = []
    compute = minilm_engine.embed_array

    def recording(prompts, pooling_params=None):
        calls.append(list(prompts))
        return compute(prompts, pooling_params)

    monkeypatch.setattr(minilm_engine, "embed_array", recording)
    return calls


@pytest.fixture(scope="session")
def splade_engine(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """A tiny random SPLADE model (sentence-transformers SparseEncoder layout) on MiniLM's vocabulary."""
    from poolrag.engine import Engine
    from poolrag.testing.tiny_models import build_splade

    return Engine(build_splade(tmp_path_factory.mktemp("splade"), minilm_path))


@pytest.fixture(scope="session")
def clip_engine(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """A tiny random CLIP (texts and images into one space), saved with its image processor."""
    from poolrag.engine import Engine
    from poolrag.testing.tiny_models import build_clip

    return Engine(build_clip(tmp_path_factory.mktemp("clip"), minilm_path))


@pytest.fixture(scope="session")
def photo_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two small pictures written by Pillow (a gradient and a checkerboard), PNG and JPEG."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("photos")
    gradient = Image.linear_gradient("L").resize((48, 40)).convert("RGB")
    board = Image.new("RGB", (40, 56), "white")
    for x in range(0, 40, 8):
        for y in range((x // 8) % 2 * 8, 56, 16):
            board.paste((200, 30, 30), (x, y, x + 8, y + 8))
    paths = [folder / "gradient.png", folder / "board.jpg"]
    gradient.save(paths[0])
    board.save(paths[1], quality=95)
    return paths


# -- servers (same engines) ------------------------------------------------------------------------------
def _server(engine: str, name: str, **settings: object) -> Callable[..., Iterator[str]]:
    """A session fixture: the URL of a live server (:func:`poolrag.testing.live_server.serve`,
    imported when a test first asks for one) of the engine fixture ``engine``, serving it as ``name``."""

    def url(request: pytest.FixtureRequest) -> Iterator[str]:
        from poolrag.testing.live_server import serve

        yield from serve(request.getfixturevalue(engine), name, **settings)

    url.__doc__ = f"``{engine}`` served as ``{name}`` on 127.0.0.1."
    return pytest.fixture(scope="session")(url)


splade_url = _server("splade_engine", "splade")
clip_url = _server("clip_engine", "clip")
minilm_url = _server("minilm_engine", "minilm")
matryoshka_url = _server("matryoshka_engine", "minilm-matryoshka")
#: requires ``Authorization: Bearer API_KEY``
keyed_minilm_url = _server("minilm_engine", "minilm", api_key=API_KEY)
cross_encoder_url = _server("cross_encoder_engine", "reranker")
colbert_url = _server("colbert_engine", "colbert")


@pytest.fixture(scope="session")
def embedder_and_reranker_url(minilm_engine: Engine, cross_encoder_engine: Engine) -> Iterator[str]:
    """One server running two models: ``minilm`` (the first) and ``reranker``."""
    from poolrag.server import ServerSettings
    from poolrag.server.app import create_models_app
    from poolrag.testing.live_server import LiveServer

    models = [
        (minilm_engine, ServerSettings(served_model_names=("minilm",))),
        (cross_encoder_engine, ServerSettings(served_model_names=("reranker",))),
    ]
    with LiveServer(create_models_app(models)) as live:
        yield live.url


@pytest.fixture(params=["in_process", "remote"])
def model_sources(request: pytest.FixtureRequest) -> tuple[dict, dict]:
    """Constructor arguments of an embedding adapter (MiniLM) and of a reranker (the cross-encoder):
    the loaded engines, or the servers running them."""
    if request.param == "in_process":
        return (
            {"engine": request.getfixturevalue("minilm_engine")},
            {"engine": request.getfixturevalue("cross_encoder_engine")},
        )
    return (
        {"base_url": request.getfixturevalue("minilm_url")},
        {"base_url": request.getfixturevalue("cross_encoder_url")},
    )


@pytest.fixture
def llama_index_settings() -> Iterator[None]:
    """LlamaIndex's process-global ``Settings`` (embedding model, LLM) put back as they were after the
    test, for tests and documented examples that set them."""
    from llama_index.core import Settings

    saved = (Settings._embed_model, Settings._llm)
    yield
    Settings._embed_model, Settings._llm = saved


@pytest.fixture
def run_doc_example(
    minilm_path: Path, assets: Path, capsys: pytest.CaptureFixture[str]
) -> Callable[[str, str], str]:
    """``run(code, label)``: a documented example run as written but on local model folders; returns
    what it printed."""
    folders = {"minilm_path": minilm_path, "assets": assets}
    models = {hub_id: folders[root] / sub for hub_id, (root, sub) in DOC_MODELS.items()}

    def run(code: str, label: str) -> str:
        code = with_local_models(code, models)
        assert all(f'"{hub_id}"' not in code for hub_id in models)
        exec(compile(code, label, "exec"), {})
        return capsys.readouterr().out

    return run
