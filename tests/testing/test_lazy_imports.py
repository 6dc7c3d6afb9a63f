"""poolrag.testing is importable without the test extra's heavy packages, and its pytest plugins fix
the session's settings before anything reads them.

The plugins are imported by pytest before its conftest fixtures run: if importing them loaded
transformers or the hub client, ``HF_HUB_OFFLINE`` (read once, at import) would be set too late.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import poolrag

TESTING = Path(poolrag.__file__).resolve().parent / "testing"


def _loaded_after(imports: str, watched: tuple[str, ...]) -> list[str]:
    loaded = f"sorted(m for m in {watched!r} if m in sys.modules)"
    code = f"import json, sys\n{imports}\nprint(json.dumps({loaded}))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_no_helper_imports_sentence_transformers_or_ray_on_import() -> None:
    modules = sorted(path.stem for path in TESTING.glob("*.py") if path.stem != "__init__")
    assert {"partner_fixtures", "model_fixtures", "tiny_models", "live_server"} <= set(modules)
    imports = "\n".join(f"import poolrag.testing.{name}" for name in modules)
    assert _loaded_after(imports, ("sentence_transformers", "ray", "pylate")) == []


def test_the_plugins_load_no_model_library_and_set_the_offline_hub() -> None:
    imports = (
        "import os\nos.environ.pop('HF_HUB_OFFLINE', None)\n"
        "import poolrag.testing.partner_fixtures, poolrag.testing.model_fixtures\n"
        "assert os.environ['HF_HUB_OFFLINE'] == '1' and os.environ['POOLRAG_TUNE'] == 'off'"
    )
    watched = ("torch", "transformers", "huggingface_hub", "fastapi", "uvicorn")
    assert _loaded_after(imports, watched) == []
