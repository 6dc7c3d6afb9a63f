"""A model argument is a local folder, a hub id (``name`` or ``org/name``), or a path that does not
name a folder: the last is refused as such, without asking the hub about it."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest

from poolrag import ModelLoadError
from poolrag.config.resolve import resolve_model_path

MISSING = ["/nonexistent/model", "/models/x", "./models/minilm", "~/models/x", "a/b/c"]


@pytest.mark.parametrize("missing", MISSING)
def test_a_path_that_names_no_folder_is_refused_as_a_path(missing: str, hub_asked: list[str]) -> None:
    with pytest.raises(ModelLoadError, match=r"^model path .* is not a folder$"):
        resolve_model_path(missing)
    assert hub_asked == []


def test_a_file_is_not_a_model_folder(tmp_path: Path, hub_asked: list[str]) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="is not a folder"):
        resolve_model_path(tmp_path / "model.safetensors")
    assert hub_asked == []


@pytest.mark.parametrize("hub_id", ["BAAI/bge-base-en-v1.5", "bert-base-uncased"])
def test_a_hub_id_goes_to_the_hub(hub_id: str, hub_asked: list[str]) -> None:
    with pytest.raises(ModelLoadError, match="is a Hugging Face hub id, which needs network access") as err:
        resolve_model_path(hub_id)
    assert f"map the id to one in $POOLRAG_MODEL_MAP ({hub_id}=FOLDER)" in str(err.value)  # the offline way
    assert hub_asked[-1] == hub_id  # a bare name is sentence-transformers' first (test_bare_names.py)


def test_a_folder_is_used_as_it_is(tmp_path: Path) -> None:
    assert resolve_model_path(tmp_path) == tmp_path.resolve()


def test_vllms_hub_options_reach_the_hub_and_the_token_stays_out_of_reprs(
    minilm_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``download_dir`` / ``hf_token`` / ``tokenizer_revision`` (vLLM's names, ``LLM(...)`` and
    ``poolrag serve`` flags) go to huggingface_hub for the model and for a separate tokenizer."""
    from poolrag import LLM
    from poolrag.config.resolve import TOKENIZER_FILES
    from poolrag.engine_args import EngineArgs

    asked: list[tuple[str, dict[str, object]]] = []

    def hub(repo_id: str, **kwargs: object) -> str:  # the hub, answering from a folder it has
        asked.append((repo_id, kwargs))
        return str(minilm_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub)
    llm = LLM(
        "org/embedder",
        tokenizer="org/tokenizer",
        tokenizer_revision="v2",
        download_dir=str(tmp_path),
        hf_token="hf_secret",
        tune="off",
    )
    assert llm.embed("a cat")[0].outputs.hidden_size == 384
    (model_id, model_kwargs), (tokenizer_id, tokenizer_kwargs) = asked
    assert (model_id, tokenizer_id) == ("org/embedder", "org/tokenizer")
    assert model_kwargs["cache_dir"] == tokenizer_kwargs["cache_dir"] == str(tmp_path)
    assert model_kwargs["token"] == tokenizer_kwargs["token"] == "hf_secret"
    assert model_kwargs["revision"] is None and tokenizer_kwargs["revision"] == "v2"
    assert tokenizer_kwargs["allow_patterns"] == list(TOKENIZER_FILES)
    assert "hf_secret" not in repr(llm.engine_args)
    with pytest.raises(ValueError, match="hf_token must be a str or bool, not int"):
        EngineArgs("org/embedder", hf_token=3)  # type: ignore[arg-type]


def test_the_hub_flags_parse_as_vllm_serve_takes_them() -> None:
    import argparse

    from poolrag.engine_args import EngineArgs

    parser = argparse.ArgumentParser()
    EngineArgs.add_engine_flags(parser)
    parser.add_argument("model")
    bare = EngineArgs.from_cli_args(parser.parse_args(["m", "--hf-token", "--download-dir", "/cache"]))
    assert bare.hf_token is True and bare.download_dir == "/cache"
    given = EngineArgs.from_cli_args(
        parser.parse_args(["m", "--hf_token", "hf_x", "--tokenizer-revision", "v1"])
    )
    assert given.hf_token == "hf_x" and given.tokenizer_revision == "v1"


def test_tokenizer_revision_alone_is_the_models_tokenizer_at_that_revision_and_bm25_takes_the_hub_options(
    minilm_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """vLLM's ``tokenizer_revision`` without ``tokenizer`` is the model's own tokenizer at that revision
    (not dropped); a BM25 encoder built from ``engine_args`` asks the hub the way the engine does."""
    from poolrag import Engine
    from poolrag.engine_args import EngineArgs
    from poolrag.frameworks.fields import SparseFields

    asked: list[tuple[str, dict[str, object]]] = []

    def hub(repo_id: str, **kwargs: object) -> str:
        asked.append((repo_id, kwargs))
        return str(minilm_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub)
    engine = Engine("org/embedder", tokenizer_revision="v2", hf_token="hf_secret", tune="off")
    # another tokenizer decides the token ids: its files key caches and collections, the folder's own does not
    assert engine.facts.output_fingerprint != Engine(minilm_path, tune="off").facts.output_fingerprint
    assert Engine(minilm_path, tune="off").facts == Engine(minilm_path, tune="off").facts
    assert [(repo, kwargs["revision"], kwargs["token"]) for repo, kwargs in asked] == [
        ("org/embedder", None, "hf_secret"),
        ("org/embedder", "v2", "hf_secret"),
    ]
    asked.clear()
    args = EngineArgs("org/embedder", revision="r1", download_dir=str(tmp_path), hf_token="hf_secret")
    SparseFields(engine_args=args)  # BM25 over the model's tokenizer: nothing but tokenizer files fetched
    ((repo, kwargs),) = asked
    assert (repo, kwargs["revision"], kwargs["cache_dir"], kwargs["token"]) == (
        "org/embedder",
        "r1",
        str(tmp_path),
        "hf_secret",
    )


def _hub_cache(cache: Path, repo_id: str, folder: Path, sha: str, branch: str) -> Path:
    """``folder`` laid out as huggingface_hub caches a download of ``repo_id`` at commit ``sha``:
    content-addressed blobs, the snapshot's files as relative symlinks to them, ``refs/<branch>``."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / branch).write_text(sha)
    snapshot = repo / "snapshots" / sha
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


@pytest.mark.parametrize("hub", ["offline", "unreachable"])
def test_a_warm_hub_cache_answers_a_branch_and_a_commit_sha(
    tiny_model: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: str
) -> None:
    """With ``HF_HUB_OFFLINE=1`` or no hub to reach, ``revision=<commit sha>`` loads the cached
    snapshot, as sentence-transformers does (huggingface_hub's ``snapshot_download`` asks the hub
    for that commit's files all the same, and failed)."""
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine
    from poolrag.testing.tiny_models import SENTENCES, write_sentence_transformers

    if hub == "unreachable":  # online, but nothing listens where the hub should be
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    assert (hub == "offline") == huggingface_hub.constants.HF_HUB_OFFLINE
    folder = tmp_path / "model"
    shutil.copytree(tiny_model("bert"), folder)
    write_sentence_transformers(folder, pooling="mean", normalize=True)
    cache, sha = tmp_path / "hub", "0123456789abcdef0123456789abcdef01234567"
    snapshot = _hub_cache(cache, "org/tiny", folder, sha, "v1")
    for revision in ("v1", sha):
        assert resolve_model_path("org/tiny", revision, download_dir=str(cache)) == snapshot
    # sentence-transformers retries an unreachable hub for minutes before it reads the cache
    where = {"revision": sha, "cache_folder": str(cache)} if hub == "offline" else {}
    reference = SentenceTransformer("org/tiny" if where else str(snapshot), device="cpu", **where)
    with Engine("org/tiny", revision=sha, download_dir=str(cache), tune="off") as engine:
        got = engine.embed_array(SENTENCES)
    np.testing.assert_allclose(got, reference.encode(SENTENCES), atol=1e-6)


def test_instructor_hub_ids_pool_without_their_instruction_as_sentence_transformers_loads_them(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """INSTRUCTOR's Pooling configs say include_prompt true; sentence-transformers leaves the
    instruction out for their hub ids, and so does poolrag. The same folder by its path pools it,
    under another output fingerprint (cached vectors of one never answer for the other)."""
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine, PoolingParams
    from poolrag.testing.tiny_models import SENTENCES, write_sentence_transformers

    query = PoolingParams(prompt_name="query")
    folder = tmp_path / "model"
    shutil.copytree(tiny_model("bert"), folder)
    write_sentence_transformers(
        folder, pooling="mean", prompts={"query": "Represent the question for retrieval: "}
    )
    cache, sha = tmp_path / "hub", "89abcdef0123456789abcdef0123456789abcdef"
    snapshot = _hub_cache(cache, "hkunlp/instructor-base", folder, sha, "main")
    reference = SentenceTransformer("hkunlp/instructor-base", device="cpu", cache_folder=str(cache))
    expected = reference.encode(SENTENCES, prompt_name="query")
    with Engine("hkunlp/instructor-base", download_dir=str(cache), tune="off") as by_id:
        np.testing.assert_allclose(by_id.embed_array(SENTENCES, query), expected, atol=1e-6)
        with Engine(str(snapshot), tune="off") as by_path:
            pooled = by_path.embed_array(SENTENCES, query)
            assert np.abs(pooled - expected).max() > 1e-3  # the folder's own config: the prompt pooled
            assert by_path.facts.output_fingerprint != by_id.facts.output_fingerprint


def test_another_instructor_folder_that_pools_its_prompt_is_warned_about(
    tiny_model: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As sentence-transformers warns: its config decides, and the user learns it differs from
    how INSTRUCTOR models were trained."""
    from poolrag import Engine

    folder = shutil.copytree(tiny_model("bert"), tmp_path / "my-instructor-small")
    with caplog.at_level("WARNING", logger="poolrag.config.model_spec"), Engine(str(folder), tune="off"):
        pass
    assert "INSTRUCTOR models pool without their instruction" in caplog.text
