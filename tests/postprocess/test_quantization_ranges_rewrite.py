"""Rewriting a ranges file others read: ``poolrag calibrate --out ranges.json`` run again while a
``poolrag serve --calibration ranges.json`` (whose workers read it as each starts) or an ingest
uses it. The file was truncated and written in place, so a reader at that moment met a file cut
short and refused it, and a write the disk refused left the previous calibration truncated. Each
save now goes to a name of its own and is renamed over the file: a reader sees the old ranges or
the new, whole.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from poolrag.postprocess.quantization_ranges import QuantizationRanges

WIDTHS = (384, 768, 1024, 2048, 4096)


def _ranges(seed: int) -> QuantizationRanges:
    rng = np.random.default_rng(seed)
    return QuantizationRanges.from_vectors({w: rng.normal(size=(4, w)) for w in WIDTHS}, f"m@{seed}")


def _python(script: str, *args: str, **popen: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args], env=env, text=True, **popen
    )  # type: ignore[call-overload]


def test_a_rewrite_the_disk_refuses_leaves_the_previous_ranges_whole(tmp_path: Path) -> None:
    out = tmp_path / "ranges.json"
    _ranges(1).save(out)
    before = out.read_bytes()
    # another process whose file size limit stops the write a few KB in (EFBIG, as a full disk would)
    writer = _python(
        """
        import resource, signal, sys
        import numpy as np
        from poolrag.postprocess.quantization_ranges import QuantizationRanges
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        rng = np.random.default_rng(2)
        ranges = QuantizationRanges.from_vectors({w: rng.normal(size=(4, w)) for w in (384, 4096)}, "m@2")
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
        try:
            ranges.save(sys.argv[1])
        except OSError as exc:
            print(exc.errno)
        """,
        str(out),
        stdout=subprocess.PIPE,
    )
    said, _ = writer.communicate(timeout=120)
    assert writer.returncode == 0 and said.strip() == "27", said  # EFBIG
    assert out.read_bytes() == before
    assert QuantizationRanges.load(out).model == "m@1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ranges.json"]  # no partial file left


def test_a_reader_in_another_process_never_meets_a_file_cut_short(tmp_path: Path) -> None:
    out = tmp_path / "ranges.json"
    stop = tmp_path / "stop"
    versions = [_ranges(seed) for seed in (1, 2)]
    versions[0].save(out)
    reader = _python(
        """
        import sys
        from pathlib import Path
        from poolrag.errors import InvalidInputError
        from poolrag.postprocess.quantization_ranges import QuantizationRanges
        out, stop = Path(sys.argv[1]), Path(sys.argv[2])
        print("reading", flush=True)
        reads = refused = 0
        while not stop.exists():
            try:
                QuantizationRanges.load(out)
            except InvalidInputError as exc:
                refused += 1
                print(exc, file=sys.stderr)
            reads += 1
        print(reads, refused)
        """,
        str(out),
        str(stop),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
        for round in range(150):
            versions[round % 2].save(out)
    finally:
        stop.touch()
        said, errors = reader.communicate(timeout=120)
    reads, refused = map(int, said.split())
    assert reads > 0
    assert refused == 0, errors.splitlines()[:3]
