"""config/families.py: reading a folder's config costs no more imports than the folder needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# transformers' Llama config imports its activations and, through them, torch.distributed: 1-2 s of
# every start on a 2-core machine, for the one family (NVIDIA's bidirectional Llama) that needs it
PROBE = """
import sys
from pathlib import Path
from poolrag.config.families import read_hf_config
config = read_hf_config(Path(sys.argv[1]), trust_remote_code=False)
print(config.model_type, "torch.distributed.tensor" in sys.modules)
"""


def test_an_encoders_config_is_read_without_importing_torch_distributed(minilm_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(minilm_path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["bert", "False"]
