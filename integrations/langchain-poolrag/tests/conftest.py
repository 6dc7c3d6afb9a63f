"""The engines, servers and corpus shared with poolrag's own tests (``tests/adapter_fixtures.py``
in the poolrag repository, which builds the test models)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
pytest_plugins = ["adapter_fixtures"]
