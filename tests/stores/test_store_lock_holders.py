"""A store another process holds open names that process.

Seen from outside: a second ``poolrag search`` on a Milvus Lite file, a Qdrant local folder or a
Qdrant Edge shard that a notebook or a forgotten ingest still held was refused with "is another
process using it?" and nothing more to go on. Now the one line names the holder's pid and its
command line (secrets left out), read from Linux's ``/proc/locks``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from stores_support import store_location

from poolrag.stores import CollectionSpec, open_store
from poolrag.stores.errors import StoreUnavailableError
from poolrag.stores.retry import RetryPolicy

pytestmark = pytest.mark.skipif(
    not Path("/proc/locks").exists(), reason="lock holders are read from /proc/locks"
)

ONE_TRY = RetryPolicy(attempts=1)
SECRET = "s3cr3t-key-of-the-holder"

HOLDER = textwrap.dedent(
    """
    import sys
    from poolrag.stores import CollectionSpec, open_store

    kind, where = sys.argv[1], sys.argv[2]
    store = open_store(kind, "c", **{"uri" if kind == "milvus" else "path": where})
    store.ensure_collection(CollectionSpec(name="c", dimension=8, model_identity="m@1", full_dimension=8))
    print("held", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


@pytest.fixture
def hold(tmp_path: Path) -> Iterator:
    """Start a holder process of a store kind (a script run as ``python holder.py KIND WHERE ...``,
    short enough that its whole command line is shown) and stop it after the test."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holders: list[subprocess.Popen[str]] = []

    def start(kind: str, *extra: str) -> subprocess.Popen[str]:
        where = Path(next(iter(store_location(kind, tmp_path).values()))).name
        holder = subprocess.Popen(
            [sys.executable, script.name, kind, where, *extra],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        holders.append(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held", holder.stderr.read()
        return holder

    yield start
    for holder in holders:
        holder.kill()
        holder.wait(timeout=30)


def _refusal(kind: str, tmp_path: Path) -> str:
    with pytest.raises(StoreUnavailableError) as refused:
        store = open_store(kind, "c", retry=ONE_TRY, **store_location(kind, tmp_path))
        try:  # a qdrant-edge store opens its shard when it first needs the collection
            store.ensure_collection(
                CollectionSpec(name="c", dimension=8, model_identity="m@1", full_dimension=8)
            )
        finally:
            store.close()
    return str(refused.value)


@pytest.mark.parametrize("kind", ["milvus", "qdrant", "qdrant-edge"])
def test_the_refusal_names_the_holding_process(kind: str, tmp_path: Path, hold) -> None:
    holder = hold(kind)
    message = _refusal(kind, tmp_path)
    assert f"held by pid {holder.pid} (holder.py {kind} " in message


def test_the_holders_api_key_is_not_shown(tmp_path: Path, hold) -> None:
    holder = hold("qdrant", "--api-key", SECRET, f"--token={SECRET}", "--chunk-tokens", "256")
    message = _refusal("qdrant", tmp_path)
    expected = (
        f"held by pid {holder.pid} (holder.py qdrant qdrant --api-key *** --token=*** --chunk-tokens 256)"
    )
    assert expected in message
    assert SECRET not in message
