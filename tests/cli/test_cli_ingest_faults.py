"""Issue 27, items 5 and 7: store faults are one line. A full disk (a file size limit on the child
process: every write past it fails with EFBIG, as on a full disk) stops ``poolrag ingest`` with one
line naming the store's path and the cause and exit code 4, the checkpoint intact, and a re-run
resumes; a Milvus Lite database held by another writer is waited on without milvus_lite's
tracebacks, then reported in one line with exit code 3."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.ingest.checkpoint import checkpointed
from poolrag.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
RETRIES = ["--retries", "3", "--retry-delay", "0.2"]
FILE_SIZE_LIMIT = 60_000  # bytes: a few batches of the samples fit, not all of them


def _poolrag(args: list[str], home: Path, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(home / "cache")}

    def limit_file_size() -> None:  # Python ignores SIGXFSZ, so a write past it fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        preexec_fn=limit_file_size if file_size_limit is not None else None,
    )


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and "torchao" not in line]
    lines = [line for line in lines if not line.startswith("W") or "poolrag" in line]  # torch's own
    assert "Traceback" not in stderr, stderr[-3000:]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize(("kind", "flag", "name"), [("milvus", "--uri", "m.db"), ("qdrant", "--path", "q")])
def test_a_full_disk_is_one_line_and_the_rerun_resumes(
    kind: str, flag: str, name: str, tmp_path: Path
) -> None:
    location = tmp_path / name
    checkpoint = tmp_path / "ck.json"
    args = ["ingest", str(SAMPLES), "--store", kind, flag, str(location), "--collection", "c", "--no-cache"]
    args += ["--checkpoint", str(checkpoint), "--batch-size", "2", "--quiet", "--json"]

    full = _poolrag(args, tmp_path, FILE_SIZE_LIMIT)
    assert full.returncode == 4, full.stderr[-3000:]
    line = _one_line(full.stderr)
    assert line.startswith("poolrag ingest: error: cannot write") and str(location) in line, line
    assert "file size limit" in line or "disk" in line, line
    done = checkpointed(checkpoint)  # whole and readable
    assert done, "the documents stored before the fault are checkpointed"

    rerun = _poolrag(args, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout)
    assert report["resumed"] and report["documents_skipped"] == len(done)
    store = open_store(kind, "c", **({"uri": str(location)} if kind == "milvus" else {"path": str(location)}))
    try:
        stored_sources = set(store.list_sources().values())
    finally:
        store.close()
    files = {p.resolve().as_posix() for p in SAMPLES.rglob("*") if p.suffix in (".md", ".txt")}
    assert stored_sources == files
    assert not checkpoint.exists()  # a finished run needs none


def test_a_locked_milvus_lite_database_is_waited_on_quietly(tmp_path: Path) -> None:
    database = tmp_path / "m.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfrom pymilvus import MilvusClient\n"
            f"c = MilvusClient(uri={str(database)!r})\nprint('held', flush=True)\ntime.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        out = _poolrag(
            ["ingest", str(SAMPLES / "music"), "--uri", str(database), "--no-cache", "--quiet", *RETRIES],
            tmp_path,
        )
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert out.returncode == 3, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    retries = [line for line in out.stderr.splitlines() if "retry " in line]
    assert len(retries) == 2 and all(line.startswith("WARNING poolrag.stores.retry:") for line in retries)
    errors = [line for line in out.stderr.splitlines() if line.startswith("poolrag ingest: error:")]
    assert len(errors) == 1 and str(database) in errors[0], out.stderr[-3000:]
    noise = [line for line in out.stderr.splitlines() if line not in retries and line not in errors]
    assert not [line for line in noise if "milvus" in line.lower()], out.stderr[-3000:]  # its logger too


@pytest.mark.parametrize(("kind", "flag", "name"), [("milvus", "--uri", "m.db"), ("qdrant", "--path", "q")])
def test_a_read_only_store_folder_is_one_line_and_loses_nothing(
    kind: str, flag: str, name: str, tmp_path: Path
) -> None:
    """Issue 27 item 5: "a read-only Qdrant folder: traceback (disk I/O error)". A store whose folder
    is mounted read-only (a read-only bind mount: root's writes are refused too, as a user's are by
    permissions) is refused before anything runs, in one line naming the path and the cause, exit
    code 2; what it held is untouched, and the same run on the writable folder stores the new file."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(["Knead the dough for ten minutes.", "Proof it overnight in the fridge."]):
        (docs / f"{i}.md").write_text(text)
    store_dir, mounted = tmp_path / "store", tmp_path / "read-only"
    store_dir.mkdir()
    mounted.mkdir()
    common = ["--collection", "c", "--no-cache", "--quiet", "--json"]
    first = _poolrag(["ingest", str(docs), "--store", kind, flag, str(store_dir / name), *common], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (docs / "2.md").write_text("Bake at 250 degrees with steam.")

    subprocess.run(["mount", "--bind", str(store_dir), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], check=True)
        refused = _poolrag(
            ["ingest", str(docs), "--store", kind, flag, str(mounted / name), *common], tmp_path
        )
    finally:
        subprocess.run(["umount", str(mounted)], check=True)
    assert refused.returncode == 2, refused.stderr[-3000:]
    line = _one_line(refused.stderr)
    assert line.startswith("poolrag ingest: error: cannot write") and str(mounted) in line, line
    assert "Read-only file system" in line, line

    again = _poolrag(["ingest", str(docs), "--store", kind, flag, str(store_dir / name), *common], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["upserted"] == 1  # the two stored before are intact: only the new one
    location = {"uri": str(store_dir / name)} if kind == "milvus" else {"path": str(store_dir / name)}
    store = open_store(kind, "c", **location)
    try:
        assert store.count() == 3  # nothing lost, nothing written twice
    finally:
        store.close()
