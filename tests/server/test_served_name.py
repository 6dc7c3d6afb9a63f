"""The default served name: a hub id as given, a local folder by its last path component; the
folder's absolute path appears in no answer, header or error (issue 27)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from poolrag.client.wire import MODEL_IDENTITY_HEADER
from poolrag.server.settings import default_served_name

from .conftest import cli_server


def test_a_hub_id_is_served_under_its_own_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    assert default_served_name("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )


@pytest.mark.parametrize("spelling", ["{abs}", "{abs}/", "models/my-model", "./models/my-model/", "."])
def test_a_folder_is_served_under_its_last_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    folder = tmp_path / "models" / "my-model"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder if spelling == "." else tmp_path)
    assert default_served_name(spelling.format(abs=folder)) == "my-model"


@pytest.fixture(scope="module")
def folder_server(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``poolrag serve /abs/.../my-minilm`` without ``--served-model-name``."""
    folder = tmp_path_factory.mktemp("models") / "my-minilm"
    folder.mkdir()
    for item in minilm_path.iterdir():
        (folder / item.name).symlink_to(item.resolve())
    log = folder.parent / "server.log"
    with cli_server(log, str(folder), "--log-level", "warning") as (url, _):
        yield url, folder


def _shows_no_path(response: httpx.Response, folder: Path) -> None:
    wire = response.text + "\n".join(f"{k}: {unquote(v)}" for k, v in response.headers.items())
    for path in {str(folder), str(folder.resolve()), str(folder.parent)}:
        assert path not in wire, f"{response.request.url.path} shows {path!r}"


def test_answers_name_the_folder_by_its_last_component(folder_server: tuple[str, Path]) -> None:
    url, folder = folder_server
    with httpx.Client(timeout=120) as http:
        models = http.get(f"{url}/v1/models")
        assert [card["id"] for card in models.json()["data"]] == ["my-minilm"]
        assert models.json()["data"][0]["model_identity"].startswith("my-minilm@")
        embedded = http.post(f"{url}/v1/embeddings", json={"input": "hello"})
        assert embedded.status_code == 200 and embedded.json()["model"] == "my-minilm"
        assert unquote(embedded.headers[MODEL_IDENTITY_HEADER]).startswith("my-minilm@")
        unknown = http.post(f"{url}/v1/embeddings", json={"input": "hello", "model": "other"})
        assert unknown.status_code == 404 and "use 'my-minilm'" in unknown.json()["error"]["message"]
        too_long = http.post(f"{url}/v1/embeddings", json={"input": "word " * 1000, "truncate": False})
        assert too_long.status_code == 400
        wrong_task = http.post(f"{url}/classify", json={"input": "hello"})
        assert wrong_task.status_code == 400
        missing = http.get(f"{url}/nowhere")
        assert missing.status_code == 404
        for response in (models, embedded, unknown, too_long, wrong_task, missing):
            _shows_no_path(response, folder)


def test_the_folder_path_it_was_started_with_names_the_model_too(folder_server: tuple[str, Path]) -> None:
    """vLLM's example clients send the ``--model`` they were given, a path for a local folder: the
    path reaches the model, and the answer still names it by its served name."""
    url, folder = folder_server
    with httpx.Client(timeout=120) as http:
        for spelling in (str(folder), str(folder.resolve())):
            embedded = http.post(f"{url}/v1/embeddings", json={"input": "hello", "model": spelling})
            assert embedded.status_code == 200, embedded.text
            assert embedded.json()["model"] == "my-minilm"
            _shows_no_path(embedded, folder)
        other = http.post(f"{url}/v1/embeddings", json={"input": "hello", "model": str(folder.parent)})
        assert other.status_code == 404
        assert [card["id"] for card in http.get(f"{url}/v1/models").json()["data"]] == ["my-minilm"]


def test_a_model_retrieved_by_its_folder_path_is_described_under_its_served_name(
    folder_server: tuple[str, Path],
) -> None:
    """``client.models.retrieve(path)`` reaches the model as any request naming the path does, and
    its card is the one ``/v1/models`` lists: the path it was asked by is not echoed as its id."""
    url, folder = folder_server
    with httpx.Client(timeout=120) as http:
        listed = http.get(f"{url}/v1/models").json()["data"][0]
        for spelling in (str(folder), str(folder.resolve())):
            retrieved = http.get(f"{url}/v1/models/{spelling}")
            assert retrieved.status_code == 200, retrieved.text
            assert retrieved.json() == listed
            _shows_no_path(retrieved, folder)
