"""An out-of-memory split runs its halves without the whole batch's prepared tensors (a real engine
under an address-space cap, in a child process).

The engine core held the batch it prepared while the runner split it, so each half ran beside the
whole batch's pixels: under a cap where the halves fit alone, they ran out of memory too, the batch
was split again and the token budget was lowered for the engine's life below what fits. The image
tower here is small but for its feed-forward width, so a forward pass's activations are about as big
as its pixels. How much address space a forward takes is the machine's (oneDNN's kernels for AVX2,
AVX-512 or AMX): fresh children measure it for a half and for the whole batch here, and the capped
child (``RLIMIT_AS``, set once warm) gets a half's need and half the batch's pixels more, room a half
takes, the whole does not and a half beside the whole batch's pixels does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.testing.tiny_models import build_clip

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="caps a process's address space (Linux)")

#: argv: the model folder, then "half" or "whole" (run it uncapped, report the address space it
#: took), or "cap" and the bytes of address space the batch may take beyond the warm process's
CHILD = """
import json, resource, sys
from pathlib import Path
import matplotlib
from PIL import Image
from poolrag import Engine
from poolrag.request import ResolvedParams
from poolrag.testing import engine_internals as internals

def status(field):
    lines = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(field + ":"))

photo = Image.open(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg").convert("RGB")
images = [photo.crop((i, i, 400 + i, 400 + i)) for i in range(18)]
engine = Engine(sys.argv[1], max_batch_tokens=1 << 20)
requests = internals.processor(engine).texts(images, ResolvedParams(task="embed"), None, None)
executor = internals.executor(engine)
executor.execute(requests[16:])  # warm
batch = requests[:16]
pixels = sum(r.pixels.values.nbytes for r in batch)
size = status("VmSize")
if sys.argv[2] in ("half", "whole"):
    executor.execute(batch[:8] if sys.argv[2] == "half" else batch)
    print(json.dumps({"took": status("VmPeak") - size, "pixels": pixels}))
    sys.exit(0)
limit = size + int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
vectors = executor.execute(batch)
print(json.dumps({"vectors": len(vectors), "too_big": internals.runner(engine).oom_budget.limit,
                  "tokens": sum(r.num_tokens for r in batch)}))
"""


def _child(folder: Path, *args: str) -> dict[str, int]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-c", CHILD, str(folder), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_halves_of_a_batch_that_ran_out_of_memory_run_without_its_pixels(
    tmp_path: Path, minilm_path: Path
) -> None:
    folder = build_clip(tmp_path / "clip", minilm_path, image_size=512, intermediate_size=65536)
    half, whole = _child(folder, "half"), _child(folder, "whole")
    room = half["took"] + half["pixels"] // 2
    assert whole["took"] > room, (half, whole)  # the cap separates a half from the whole here
    report = _child(folder, "cap", str(room))
    assert report["vectors"] == 16
    # the whole batch ran out of memory and its halves fit: only the whole is known too big
    assert report["too_big"] == report["tokens"], (report, half, whole)
