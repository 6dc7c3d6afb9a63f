"""The free space a Qdrant Edge shard needs, checked before the shard touches its memory maps.

qdrant-edge keeps its vectors, payloads and write-ahead log in sparse files it writes through memory
maps. Filling a hole of such a file on a full disk is no error the engine can return: the kernel
sends SIGBUS and the process dies without a word (exit 135), wherever it was. So the room is
measured first, while a refusal can still be one line (:class:`StoreWriteError`, exit code 4):

- before the shard loads: loading maps its vector chunks and reads them in whole, which on tmpfs
  allocates every hole (measured: 32 MiB per chunk file), so it needs what is unbacked there;
- before each write: a batch lands in the vector chunks, again in the log and in the payload pages,
  page by page, so it needs a few times its own size, plus :data:`HEADROOM_BYTES` for the pages
  that bookkeeping and page rounding take;
- before optimising: the optimiser writes each segment it rebuilds anew (with its index and
  quantized codes) before dropping the old one, so it needs the shard's size again.

The check sees poolrag's own writes only; another process filling the disk between the check and
the write can still end the run the old way.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from poolrag.stores.base import ChunkRecord
from poolrag.stores.storage_faults import StoreWriteError

#: Free space kept beyond a write's own estimate (log records, id tracker, payload bookkeeping).
HEADROOM_BYTES = 8 << 20
#: How many times its own size a batch may take on disk: vector chunks, the log, payload pages.
WRITE_FACTOR = 3
#: Files under a segment's ``vector_storage*`` folders that loading maps and reads in whole.
_LOADED_PATTERNS = ("chunk_*.mmap", "flags_*.dat")
_MIB = 1 << 20


def free_bytes(folder: Path) -> int:
    """What an unprivileged writer may still allocate on ``folder``'s file system."""
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def unbacked_bytes(shard_dir: Path) -> int:
    """Bytes of the shard's vector files that have no disk blocks yet (holes loading may fill)."""
    total = 0
    for storage in shard_dir.glob("segments/*/vector_storage*"):
        for pattern in _LOADED_PATTERNS:
            for file in storage.rglob(pattern):
                stats = file.stat()
                total += max(0, stats.st_size - stats.st_blocks * 512)
    return total


def shard_bytes(shard_dir: Path) -> int:
    """The bytes the shard's files hold on disk (what optimising may write again)."""
    return sum(f.stat().st_blocks * 512 for f in shard_dir.rglob("*") if f.is_file())


def batch_bytes(records: Sequence[ChunkRecord]) -> int:
    """A batch's size as the shard stores it: 32-bit vectors, 8 bytes a sparse entry, the payload."""
    total = 0
    for record in records:
        total += record.vector.size * 4
        if record.multivector is not None:
            total += record.multivector.size * 4
        if record.sparse is not None:
            total += len(record.sparse.indices) * 8
        total += sum(len(str(key)) + len(str(value)) for key, value in record.payload.items())
    return total


def require_room(shard_root: Path, needed: int, doing: str) -> None:
    """Raise :class:`StoreWriteError` unless ``needed`` bytes are free where ``shard_root`` lives."""
    folder = shard_root if shard_root.exists() else shard_root.parent
    free = free_bytes(folder)
    if free < needed:
        free_mib, needed_mib = math.floor(free / _MIB * 100) / 100, math.ceil(needed / _MIB * 100) / 100
        raise StoreWriteError(
            f"cannot write the Qdrant Edge shard {shard_root}: the disk is full ({free_mib:.2f} MiB "
            f"free, {doing} needs {needed_mib:.2f} MiB); free space there and run the same command "
            "again to resume"
        )
