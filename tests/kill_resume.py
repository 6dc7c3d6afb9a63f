"""The kill-and-resume harness of the ``kill -9`` ingestion tests: a corpus of sixteen documents,
``poolrag ingest`` in a subprocess, killed once its checkpoint lists two finished documents, then
run again to the end; and reading back what landed in the store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from poolrag.ingest.checkpoint import checkpointed

SUBJECTS = ["volcanoes", "violins", "glaciers", "satellites", "orchids", "submarines", "deserts", "comets"]
SUBJECTS += ["lighthouses", "mushrooms", "bridges", "owls", "tea", "robots", "canyons", "whales"]


FACT = "Fact {n} about {subject}: observers in region {region} logged reading {reading} twice."


def write_subject_corpus(root: Path, fact: str = FACT) -> Path:
    """One file per subject of six sentences; ``fact`` is formatted with ``n``, ``subject``, ``region``
    and ``reading`` (distinct numbers, so no two chunks are alike)."""
    root.mkdir()
    for i, subject in enumerate(SUBJECTS):
        text = " ".join(fact.format(n=n, subject=subject, region=i, reading=n * 7 + i) for n in range(6))
        (root / f"{i:02d}-{subject}.txt").write_text(text)
    return root


def store_location(kind: str, tmp_path: Path) -> list[str]:
    """The ``--uri`` / ``--path`` flags of a Milvus Lite file or a Qdrant local folder."""
    return ["--uri", str(tmp_path / "m.db")] if kind == "milvus" else ["--path", str(tmp_path / "q")]


def store_kwargs(kind: str, location: list[str]) -> dict[str, str]:
    """Those flags as :func:`poolrag.stores.open_store` keywords."""
    return {"uri": location[1]} if kind == "milvus" else {"path": location[1]}


def start_ingest(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(
        [sys.executable, "-c", _CLI_WITH_CTRL_C, "ingest", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


#: ``python -m poolrag.cli`` with Ctrl-C's action as a terminal gives it: a test run started in the
#: background (``cmd &``) ignores SIGINT and its children inherit that. Set in the child itself, not
#: by a ``preexec_fn``: that forks this process with Python code to run before exec, and where gRPC
#: threads of an earlier test's Milvus client are alive, the child aborted (SIGABRT) in gRPC's fork
#: handling now and then, before the ingest started.
_CLI_WITH_CTRL_C = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('poolrag.cli', run_name='__main__', alter_sys=True)"
)


def kill_mid_run(args: list[str], checkpoint: Path, sig: signal.Signals = signal.SIGKILL) -> int:
    """Start the ingest, send ``sig`` once two documents are done; how many the checkpoint lists.
    SIGINT (Ctrl-C) must end it with exit 130 and one line saying how to resume."""
    proc = start_ingest(args)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists() and len(checkpointed(checkpoint)) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode == 130, f"not interrupted mid-run (exit {proc.returncode}): {err[-2000:]}"
        assert err.strip().splitlines() == [
            "poolrag ingest: interrupted; run the same command again to resume where it stopped"
        ], err[-2000:]
    else:
        assert proc.returncode == -sig, f"not killed mid-run (exit {proc.returncode}): {err[-2000:]}"
    done_before = len(checkpointed(checkpoint))
    assert 2 <= done_before < len(SUBJECTS)
    return done_before


#: Ray's own message when a local instance did not come up in time (a loaded 2-core machine, right
#: after a SIGKILLed driver's instance went down); the ingest never started, so it is run again.
RAY_START_TIMEOUT = "Timed out waiting for file"


def resume(args: list[str]) -> dict[str, Any]:
    """Run the same ingest again to the end; its JSON report."""
    return resume_logged(args)[0]


def resume_logged(args: list[str]) -> tuple[dict[str, Any], str]:
    """:func:`resume`, and what the run wrote to stderr."""
    for attempt in range(2):
        resumed = start_ingest(args)
        out, err = resumed.communicate(timeout=600)
        if resumed.returncode == 0 or attempt or RAY_START_TIMEOUT not in err:
            break
    assert resumed.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


def stored_sparse(store, kind: str, ids: list[str]) -> dict[str, dict[int, float]]:
    """The stored sparse vectors by chunk id (in Qdrant read straight from the client's points)."""
    if kind == "milvus":
        return {cid: v.to_dict() for cid, v in store.fetch_sparse(ids).items()}
    points = store._client.retrieve(store.collection, ids=ids, with_vectors=["sparse"])
    vectors = {str(p.id): p.vector["sparse"] for p in points}
    return {cid: dict(zip(v.indices, v.values, strict=True)) for cid, v in vectors.items()}
