"""A Hugging Face hub on 127.0.0.1 serving local model folders, for tests of what a hub id downloads.

It stands in for huggingface.co at the endpoints huggingface_hub's ``model_info`` (with and without
a revision),
``list_repo_tree``, ``snapshot_download`` and ``hf_hub_download`` call (a repo's revision info with
its ``siblings``, its recursive tree, ``HEAD``/``GET`` of ``/{repo}/resolve/{rev}/{path}`` with the
``X-Repo-Commit``, ``ETag`` and ``Content-Length`` headers it reads), so a child process pointed at it
with ``HF_ENDPOINT`` downloads real files into a real hub cache. Every file fetched is recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response

from poolrag.testing.live_server import LiveServer


class FakeHub:
    """``repos`` (``org/name`` -> folder) served at one fixed commit each; ``fetched`` lists the
    ``(repo, path)`` of every file body sent."""

    def __init__(self, repos: Mapping[str, Path]) -> None:
        self.repos = {repo: Path(folder) for repo, folder in repos.items()}
        self.fetched: list[tuple[str, str]] = []
        self.app = FastAPI()
        self.app.add_api_route("/api/models/{org}/{name}", self._info, methods=["GET"])
        self.app.add_api_route("/api/models/{org}/{name}/revision/{rev}", self._info, methods=["GET"])
        self.app.add_api_route("/api/models/{org}/{name}/tree/{rev}", self._tree, methods=["GET"])
        self.app.add_api_route(
            "/{org}/{name}/resolve/{rev}/{path:path}", self._resolve, methods=["GET", "HEAD"]
        )
        self._server: LiveServer | None = None

    def __enter__(self) -> str:
        """Start serving; the URL to set as ``HF_ENDPOINT``."""
        self.app.state.poolrag = _Settings()
        self._server = LiveServer(self.app).__enter__()
        return self._server.url

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.__exit__(*exc)

    def sha(self, repo: str) -> str:
        return hashlib.sha1(repo.encode()).hexdigest()

    def _files(self, repo: str) -> dict[str, Path]:
        folder = self.repos.get(repo)
        if folder is None:
            raise HTTPException(404, headers={"X-Error-Code": "RepoNotFound"})
        return {f.relative_to(folder).as_posix(): f for f in sorted(folder.rglob("*")) if f.is_file()}

    def _info(self, org: str, name: str, rev: str = "main") -> dict[str, Any]:
        repo = f"{org}/{name}"
        files = self._files(repo)
        return {"id": repo, "sha": self.sha(repo), "siblings": [{"rfilename": path} for path in files]}

    def _tree(self, org: str, name: str, rev: str) -> list[dict[str, Any]]:
        entries = []
        for path, file in self._files(f"{org}/{name}").items():
            entries.append({"type": "file", "path": path, "size": file.stat().st_size, "oid": _digest(file)})
        return entries

    def _resolve(self, request: Request, org: str, name: str, rev: str, path: str) -> Response:
        repo = f"{org}/{name}"
        file = self._files(repo).get(path)
        if file is None:
            raise HTTPException(404, headers={"X-Error-Code": "EntryNotFound"})
        data = file.read_bytes()
        headers = {"X-Repo-Commit": self.sha(repo), "ETag": f'"{_digest(file)}"'}
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(data))
            return Response(headers=headers)
        self.fetched.append((repo, path))
        return Response(data, headers=headers, media_type="application/octet-stream")


def _digest(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


class _Settings:
    """What :class:`LiveServer` reads of a poolrag app: the server's connection deadlines."""

    def __init__(self) -> None:
        from poolrag.server import ServerSettings

        self.settings = ServerSettings(served_model_names=("hub",))
