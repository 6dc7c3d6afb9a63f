"""What an Engine's start imports: an encoder poolrag runs natively needs torch, the tokenizer and the
config, not transformers' modelling stack. Each of those modules costs every start of ``poolrag
search``, ``serve`` and ``Engine(...)`` its import time (torch.distributed alone took 1-2 s on a
2-core machine, pulled in by a config class the model did not need)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

UNUSED_BY_A_NATIVE_ENCODER = (
    "torch.distributed.tensor",
    "torch._dynamo",
    "transformers.modeling_utils",
    "transformers.activations",
)
PROBE = """
import sys
from poolrag import Engine
Engine(sys.argv[1]).embed_array(["hello"])
print(" ".join(name for name in sys.argv[2:] if name in sys.modules) or "none")
"""


def test_a_native_encoders_start_imports_no_modelling_stack(minilm_path: Path, tmp_path: Path) -> None:
    env = os.environ | {"POOLRAG_TUNE": "off", "POOLRAG_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(minilm_path), *UNUSED_BY_A_NATIVE_ENCODER],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert done.stdout.split()[-1:] == ["none"], done.stdout
