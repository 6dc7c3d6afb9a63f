"""A cache another process keeps locked names that process.

Seen from outside: ``poolrag ingest`` beside another run on the same ``--cache`` file waited out its
timeout and stopped with "stayed locked by another process", with nothing to find that process by.
The writer's lock on the ``-shm`` file is in Linux's ``/proc/locks``; the one line now names it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from poolrag.cache import EmbeddingCache
from poolrag.cache.recovery import CacheBusyError

HOLDER = textwrap.dedent(
    """
    import sqlite3
    import sys
    from poolrag.cache import EmbeddingCache

    EmbeddingCache(sys.argv[1]).close()
    writer = sqlite3.connect(sys.argv[1], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a write under way, as another run's
    print("held", flush=True)
    sys.stdin.readline()
    """
)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="lock holders are read from /proc/locks")
def test_a_cache_locked_by_another_process_names_it(tmp_path: Path) -> None:
    (tmp_path / "holder.py").write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, "holder.py", "c.sqlite"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held", holder.stderr.read()
        with (
            pytest.raises(CacheBusyError) as busy,
            EmbeddingCache(tmp_path / "c.sqlite", timeout=0.2) as cache,
        ):
            cache.put_many({bytes(32): np.ones(4, dtype=np.float32)})
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert (
        f"stayed locked by another process for 0.2 s (held by pid {holder.pid} (holder.py c.sqlite));"
        in str(busy.value)
    )
