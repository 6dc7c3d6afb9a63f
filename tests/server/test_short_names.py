"""A served hub id also answers to its short name (``all-MiniLM-L6-v2`` for
``sentence-transformers/all-MiniLM-L6-v2``), as tutorials spell it; a short name two models share
answers neither (their full names do, and the start says so); ``GET /v1/models`` lists the served
names only (issue 45 item 5)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from poolrag import Engine
from poolrag.server import ServerSettings
from poolrag.server.app import create_models_app
from poolrag.testing.live_server import LiveServer

from .conftest import cli_server

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday."]


def _embedded(url: str, model: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/embeddings", json={"input": TEXTS, "model": model}, timeout=120)


@pytest.fixture(scope="module")
def hub_id_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``poolrag serve sentence-transformers/all-MiniLM-L6-v2`` with no served name (offline: the
    packaged copy)."""
    log = tmp_path_factory.mktemp("hub-id-server") / "server.log"
    with cli_server(log, HUB_ID, "--log-level", "warning") as (url, _):
        yield url


def test_a_served_hub_id_answers_to_its_short_name(hub_id_server: str, minilm_engine: Engine) -> None:
    expected = minilm_engine.embed_array(TEXTS)
    for name in (HUB_ID, "all-MiniLM-L6-v2"):
        response = _embedded(hub_id_server, name)
        assert response.status_code == 200, response.text
        assert response.json()["model"] == HUB_ID  # answers name the served model
        got = np.array([item["embedding"] for item in response.json()["data"]])
        np.testing.assert_allclose(got, expected, atol=1e-6)
    models = httpx.get(f"{hub_id_server}/v1/models", timeout=30).json()
    assert [card["id"] for card in models["data"]] == [HUB_ID]
    unknown = _embedded(hub_id_server, "all-MiniLM-L12-v2")
    assert unknown.status_code == 404 and HUB_ID in unknown.json()["error"]["message"]


def test_a_short_name_two_models_share_answers_neither(
    minilm_engine: Engine, minilm_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = Engine(minilm_path, hf_overrides={"matryoshka_dimensions": [128, 384]}, tune="off")
    served = [
        (minilm_engine, ServerSettings(served_model_names=(HUB_ID,))),
        (other, ServerSettings(served_model_names=("my-org/all-MiniLM-L6-v2", "my-org/minilm-mrl"))),
    ]
    with caplog.at_level(logging.WARNING, logger="poolrag.server.state"):
        app = create_models_app(served)
    assert "'all-MiniLM-L6-v2' names no model here" in caplog.text
    with LiveServer(app) as live:
        shared = _embedded(live.url, "all-MiniLM-L6-v2")
        assert shared.status_code == 404, shared.text
        assert _embedded(live.url, "my-org/all-MiniLM-L6-v2").json()["model"] == "my-org/all-MiniLM-L6-v2"
        assert _embedded(live.url, "minilm-mrl").json()["model"] == "my-org/all-MiniLM-L6-v2"
        # retrieved by its short name, a model is described as its answers name it
        card = httpx.get(f"{live.url}/v1/models/minilm-mrl", timeout=30).json()
        assert card["id"] == "my-org/all-MiniLM-L6-v2" and card["matryoshka_dimensions"] == [128, 384]
        assert _embedded(live.url, HUB_ID).json()["model"] == HUB_ID


def test_a_served_name_wins_over_another_models_short_name(minilm_engine: Engine, minilm_path: Path) -> None:
    other = Engine(minilm_path, hf_overrides={"matryoshka_dimensions": [128, 384]}, tune="off")
    served = [
        (minilm_engine, ServerSettings(served_model_names=(HUB_ID,))),
        (other, ServerSettings(served_model_names=("all-MiniLM-L6-v2",))),
    ]
    with LiveServer(create_models_app(served)) as live:
        assert _embedded(live.url, "all-MiniLM-L6-v2").json()["model"] == "all-MiniLM-L6-v2"
