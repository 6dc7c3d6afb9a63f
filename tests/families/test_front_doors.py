"""Every model family of docs/models.md runs alike through ``Engine``, ``poolrag.LLM`` and ``poolrag serve``.

One tiny model per family (tests/families/family_models.py) is loaded twice, as an ``Engine`` and
as vLLM's ``LLM`` with the same arguments, and the Engine is served over HTTP on 127.0.0.1. For
each of the family's tasks: ``LLM`` returns what ``Engine`` returns, and the matching endpoint
(``/v1/embeddings``, ``/classify``, ``/score``, or ``/pooling`` with its ``task``) returns the same
numbers. The Engine itself is checked against the family's reference (transformers,
sentence-transformers, or the published procedure by hand); each test records its largest
difference as the ``max_abs_diff`` user property (``--junitxml`` writes it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest
from family_models import BUILDERS, Call, Family

from poolrag import LLM, Engine, PoolingParams
from poolrag.server import ServerSettings, create_app
from poolrag.testing.live_server import LiveServer

NAME = "tiny"


@dataclass
class Doors:
    family: Family
    engine: Engine
    llm: LLM
    url: str


@pytest.fixture(scope="module", params=list(BUILDERS), ids=list(BUILDERS))
def doors(request, tmp_path_factory, minilm_path, tiny_model) -> Iterator[Doors]:
    root = tmp_path_factory.mktemp(request.param)
    family = BUILDERS[request.param](root, minilm_path, tiny_model)
    engine = Engine(family.folder, **family.engine_options)
    llm = LLM(str(family.folder), **family.llm_options)
    app = create_app(engine, ServerSettings(served_model_names=(NAME,)))
    with LiveServer(app) as live:
        yield Doors(family, engine, llm, live.url)


def offline(front: Engine | LLM, call: Call) -> list[np.ndarray]:
    """The call's results through ``Engine`` or ``LLM`` (their shared method names and keywords)."""
    texts = list(call.texts)
    params = PoolingParams(input_type=call.input_type) if call.input_type else None
    if call.task == "embed":
        return [o.outputs.embedding for o in front.embed(texts, params)]
    if call.task == "classify":
        return [o.outputs.probs for o in front.classify(texts, params)]
    if call.task == "score":
        return [np.asarray(o.outputs.score) for o in front.score(call.query, texts, params)]
    if call.task == "reward":
        return [o.outputs.data for o in front.reward(texts, params)]
    return [o.outputs.data for o in front.encode(texts, pooling_params=params, pooling_task=call.task)]


def served(url: str, call: Call) -> list[np.ndarray]:
    """The call's results from the endpoint ``poolrag serve`` offers for its task."""
    body: dict[str, Any] = {"model": NAME, "input": list(call.texts)}
    if call.input_type:
        body["input_type"] = call.input_type
    if call.task == "embed":
        path, key = "/v1/embeddings", "embedding"
    elif call.task == "classify":
        path, key = "/classify", "probs"
    elif call.task == "score":
        path, key = "/score", "score"
        body = {"model": NAME, "text_1": call.query, "text_2": list(call.texts)}
    else:
        path, key = "/pooling", "data"
        body["task"] = call.task
    response = httpx.post(url + path, json=body, timeout=60)
    assert response.status_code == 200, (path, response.text)
    data = sorted(response.json()["data"], key=lambda item: item["index"])
    return [np.asarray(item[key], dtype=np.float32) for item in data]


def _assert_same(got: list[np.ndarray], expected: list[np.ndarray], atol: float, what: str) -> float:
    """Assert equal within ``atol``, item by item; return the largest difference."""
    assert len(got) == len(expected), what
    worst = 0.0
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        if what.startswith("served") and np.size(b) == 0:
            # a text without step tags has a (0, 2) reward matrix; JSON writes it as [], as vLLM does
            assert np.shape(a) == (0,) and np.asarray(b).tolist() == [], f"{what}[{i}]"
            continue
        assert np.shape(a) == np.shape(b), f"{what}[{i}]: shape {np.shape(a)} != {np.shape(b)}"
        np.testing.assert_allclose(a, b, rtol=0, atol=atol, err_msg=f"{what}[{i}]")
        if np.size(b):
            worst = max(worst, float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max()))
    return worst


def test_engine_matches_the_reference(doors: Doors, request) -> None:
    diff = doors.family.reference(doors.engine)
    request.node.user_properties.append(("max_abs_diff", diff))  # in --junitxml, printed nowhere
    assert diff <= 1e-5


def test_llm_equals_engine(doors: Doors, request) -> None:
    assert doors.llm.supported_tasks == doors.engine.supported_tasks
    diffs = [
        _assert_same(offline(doors.llm, call), offline(doors.engine, call), 1e-6, f"LLM {call.label}")
        for call in doors.family.calls
    ]
    request.node.user_properties.append(("max_abs_diff", max(diffs)))


def test_served_equals_offline(doors: Doors, request) -> None:
    models = httpx.get(doors.url + "/v1/models", timeout=60).json()["data"]
    assert models[0]["tasks"] == list(doors.engine.supported_tasks)
    diffs = [
        _assert_same(served(doors.url, call), offline(doors.engine, call), 1e-5, f"served {call.label}")
        for call in doors.family.calls
    ]
    request.node.user_properties.append(("max_abs_diff", max(diffs)))
