"""``python -m poolrag_test_assets [--dest DIR]`` (with ``scripts/`` on the path): build the assets."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import poolrag_test_assets
from poolrag_test_assets.build import ensure_assets
from poolrag_test_assets.errors import AssetBuildError
from poolrag_test_assets.registry import ASSETS, DEFAULT_DEST, ENV_DEST

logger = logging.getLogger("poolrag_test_assets")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(poolrag_test_assets.__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--dest", type=Path, default=None, help=f"output directory (default: ${ENV_DEST} or {DEFAULT_DEST})"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        root = ensure_assets(args.dest)
    except AssetBuildError as exc:
        logger.error("%s", exc)
        return 1
    for spec in ASSETS:
        logger.info("%s/  %s", root / spec.folder, spec.description)
    return 0


if __name__ == "__main__":
    sys.exit(main())
