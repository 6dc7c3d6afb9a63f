"""The on-disk embedding cache: content-addressed float32 vectors in one SQLite file.

SQLite in WAL mode gives what several processes sharing one cache need without a server:
atomic transactions (a vector is either fully written or absent), concurrent readers with one
writer, and a file that survives ``kill -9``. Vectors are stored as raw little-endian float32
bytes (never pickled) next to a checksum of key + shape + bytes, so a flipped bit or a row pasted
under the wrong key is noticed, dropped and recomputed instead of silently returned. Damage SQLite
itself reports (a malformed page found when opening, reading or writing) moves the whole file
aside and the run goes on with a fresh cache: a cache is only ever a shortcut.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from poolrag.cache.recovery import (
    CacheAccessError,
    cache_access_error,
    is_corruption,
    way_out,
    write_refused,
)
from poolrag.cache_location import poolrag_cache_dir
from poolrag.counts import check_count
from poolrag.fork_holds import hold_over_fork

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB of vectors
_EVICT_TO = 0.9  # after an overflow, evict down to this fraction of the bound (amortises evictions)
_TABLE = """
CREATE TABLE IF NOT EXISTS {name} (
    key BLOB NOT NULL UNIQUE,
    dim INTEGER NOT NULL,
    nbytes INTEGER NOT NULL,
    last_used INTEGER NOT NULL,
    checksum BLOB NOT NULL,
    data BLOB NOT NULL
)"""
#: What hangs on ``vectors``: its recency index and the triggers that keep ``totals``.
_ON_VECTORS = (
    "CREATE INDEX IF NOT EXISTS vectors_last_used ON vectors(last_used)",
    "CREATE TRIGGER IF NOT EXISTS vectors_ins AFTER INSERT ON vectors\n"
    "    BEGIN UPDATE totals SET nbytes = nbytes + NEW.nbytes WHERE id = 0; END",
    "CREATE TRIGGER IF NOT EXISTS vectors_del AFTER DELETE ON vectors\n"
    "    BEGIN UPDATE totals SET nbytes = nbytes - OLD.nbytes WHERE id = 0; END",
    "CREATE TRIGGER IF NOT EXISTS vectors_upd AFTER UPDATE OF nbytes ON vectors\n"
    "    BEGIN UPDATE totals SET nbytes = nbytes - OLD.nbytes + NEW.nbytes WHERE id = 0; END",
)
#: A rowid table with the vector last: a row of a few KiB stays whole in a 4 KiB page (a WITHOUT
#: ROWID table spills every row past ~1 KiB into overflow pages, 3.1x the vectors' bytes at 384
#: dimensions), and eviction reads ``nbytes`` without following the vector's overflow pages.
_SCHEMA = (
    ";\n".join(
        (
            _TABLE.format(name="vectors"),
            "CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), "
            "nbytes INTEGER NOT NULL)",
            "INSERT OR IGNORE INTO totals VALUES (0, 0)",
            "CREATE TABLE IF NOT EXISTS bound (id INTEGER PRIMARY KEY CHECK (id = 0), "
            "max_bytes INTEGER NOT NULL)",
            *_ON_VECTORS,
        )
    )
    + ";"
)
_ROW = "key, dim, nbytes, last_used, checksum, data"
#: ``PRAGMA user_version`` of a cache in today's layout whose ``totals`` match its rows. Version 1
#: recounted ``totals``: before it, every ``INSERT OR REPLACE`` of a key already there (two
#: processes that both missed a text) added its bytes again without subtracting the old row's
#: (SQLite fires no delete trigger for a REPLACE), so eviction emptied the cache early. Version 2
#: moved the vectors out of a WITHOUT ROWID table (see :data:`_SCHEMA`).
_LAYOUT_VERSION = 2
_RECOUNTED_VERSION = 1
_SQL_VARS = 500  # keys per IN (...) query, well under SQLite's variable limit
#: ``PRAGMA application_id`` of a poolrag cache ("pool"): another program's SQLite file is never altered
_APPLICATION_ID = 0x706F6F6C
_SQLITE_HEADER = b"SQLite format 3\x00"
_COLUMNS = {
    "vectors": {"key", "dim", "data", "checksum", "nbytes", "last_used"},
    "totals": {"id", "nbytes"},
    "bound": {"id", "max_bytes"},
}


def _not_a_cache(conn: sqlite3.Connection) -> str | None:
    """Why the SQLite file ``conn`` opened is some other program's database (None: a poolrag cache, an
    empty file, or a cache written before caches were marked)."""
    if conn.execute("PRAGMA application_id").fetchone()[0] == _APPLICATION_ID:
        return None
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in sorted(tables):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table!r})")}
        if _COLUMNS.get(table) != columns:
            return f"an SQLite database of another program (it holds a table {table!r})"
    return None


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _upgrade_once(conn: sqlite3.Connection, path: Path) -> bool:
    """Bring a file an older poolrag wrote to :data:`_LAYOUT_VERSION` (each step one transaction:
    another process waits, then finds it done); True when rows moved, leaving free pages. A disk
    without room for the move keeps the older layout, which works, until a later open."""
    if _version(conn) >= _LAYOUT_VERSION:
        return False
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        if _version(conn) < _RECOUNTED_VERSION:
            # 4 * dim, not nbytes: the size the vector itself has, whatever the row says
            conn.execute(
                "UPDATE totals SET nbytes = (SELECT COALESCE(SUM(4 * dim), 0) FROM vectors) WHERE id = 0"
            )
            conn.execute(f"PRAGMA user_version = {_RECOUNTED_VERSION}")
    try:
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            if _version(conn) >= _LAYOUT_VERSION:
                return False  # another process moved it while this one waited for the lock
            moved = False
            if _in_older_layout(conn):
                short = _too_little_room(path)
                if short is not None:
                    _keep_older_layout(path, short)
                    return False
                moved = _move_to_rowid_table(conn)
            conn.execute(f"PRAGMA user_version = {_LAYOUT_VERSION}")
    except sqlite3.Error as exc:
        reason = write_refused(exc)
        if reason is None:
            raise
        # the copy that failed filled the WAL up to the disk's last byte, and a WAL keeps its size
        # until the last connection closes: give those bytes back now, or every other write to this
        # disk (the store an ingest fills) fails for as long as this process runs
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _keep_older_layout(path, reason)
        return False
    return moved


def _keep_older_layout(path: Path, reason: str) -> None:
    logger.warning(
        "embedding cache %s keeps its older, larger layout for now (%s); it moves when there is room",
        path,
        reason,
    )


def _too_little_room(path: Path) -> str | None:
    """Why the disk has no room to move ``path``'s vectors, or None. The move needs about twice the
    file: the WAL takes the new table and the old one's pages (SQLite built with secure_delete, as
    Debian's is, rewrites every page it frees), then the file grows by the new table before VACUUM
    gives the old pages back. A move started short of that commits into a WAL that cannot be
    checkpointed, and the disk stays full after the process ends."""
    try:
        files = (path, Path(f"{path}-wal"))
        needed = 2 * sum(file.stat().st_size for file in files if file.exists())
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return None  # the move itself finds out
    if free >= needed:
        return None
    return f"the disk has {free} bytes free, the move needs about {needed}"


def _in_older_layout(conn: sqlite3.Connection) -> bool:
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()
    return "WITHOUT ROWID" in sql.upper()


def _move_to_rowid_table(conn: sqlite3.Connection) -> bool:
    """Copy a WITHOUT ROWID ``vectors`` into today's table; True when there were rows to move."""
    count = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    logger.info("embedding cache: moving %d vectors to a compact layout (once per file)", count)
    conn.execute(_TABLE.format(name="vectors_compact"))
    conn.execute(f"INSERT INTO vectors_compact ({_ROW}) SELECT {_ROW} FROM vectors")
    conn.execute("DROP TABLE vectors")  # its index and triggers go with it
    conn.execute("ALTER TABLE vectors_compact RENAME TO vectors")
    for statement in _ON_VECTORS:
        conn.execute(statement)
    return count > 0


def _shrink(conn: sqlite3.Connection, path: Path) -> None:
    """Give the pages the old layout held back to the disk. Best effort: VACUUM needs room for a
    copy and no other writer; a file left unshrunk reuses its free pages for later vectors."""
    try:
        conn.execute("VACUUM")
    except sqlite3.OperationalError as exc:
        logger.info("embedding cache %s keeps its free pages for later vectors (%s)", path, exc)
    # also after a VACUUM the disk refused: the copy it wrote stays in the WAL until truncated
    with contextlib.suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def default_cache_path() -> Path:
    """``embeddings.sqlite`` under :func:`~poolrag.cache_location.poolrag_cache_dir`."""
    return poolrag_cache_dir() / "embeddings.sqlite"


def _raise_access(path: Path, exc: BaseException, timeout: float) -> None:
    error = cache_access_error(path, exc, timeout)
    if error is None:
        raise exc
    raise error from exc


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _checksum(key: bytes, dim: int, data: bytes) -> bytes:
    return hashlib.blake2b(key + dim.to_bytes(4, "little") + data, digest_size=16).digest()


def _intact_vector(key: bytes, dim: object, data: object, checksum: object) -> np.ndarray | None:
    """The float32 vector a row holds, or ``None`` for any row that is not one this cache wrote
    (SQLite keeps whatever type a column was given: an integer or text where bytes belong, a
    size that is not a whole number, a checksum that does not match); such a row is dropped
    and recomputed, never allowed to stop a run. Size 0 is a row too: a text with no terms has
    empty term counts."""
    if type(dim) is not int or dim < 0 or not isinstance(data, bytes) or not isinstance(checksum, bytes):
        return None
    if len(data) != 4 * dim or _checksum(key, dim, data) != checksum:
        return None
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


@dataclass
class CacheStats:
    """Counters of one cache object (this process only); ``corrupt`` counts entries dropped."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0
    evicted: int = 0


_CACHES: weakref.WeakSet[EmbeddingCache] = weakref.WeakSet()  # every live cache, for the fork
# A fork waits for every cache's read or write in flight. A thread inside one at the fork does not
# exist in the child: its lock stayed held there, and SQLite's own state (its mutexes, the file's lock
# records, which a connection the child opens shares) was caught mid-step, so the child's first
# lookup waited forever or found the file locked.
hold_over_fork(lambda: [cache._lock for cache in list(_CACHES)])


def _reopened(path: str, max_bytes: int | None, timeout: float) -> EmbeddingCache:
    return EmbeddingCache(path, max_bytes=max_bytes, timeout=timeout)


class EmbeddingCache:
    """Persistent, size-bounded, multi-process-safe map from 32-byte keys to float32 vectors.

    Args:
        path: the SQLite file (created with its folder; ``~`` is the home folder); default
            :func:`default_cache_path`.
        max_bytes: bound on stored vector bytes; least recently used entries are evicted past it.
            Given, it is also recorded in the file; ``None`` keeps the file's recorded bound (else
            :data:`DEFAULT_MAX_BYTES`), so a later run that does not say evicts nothing a bigger
            bound set for the file allowed.
        timeout: seconds to wait for another process's write lock before giving up.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        if isinstance(max_bytes, float) and max_bytes.is_integer():
            max_bytes = int(max_bytes)  # 2e9 is a byte count too
        self.max_bytes = None if max_bytes is None else check_count(max_bytes, "max_bytes")
        # ~ expanded as the checkpoint beside it is (--cache=~/c.sqlite reaches us unexpanded: a
        # folder named ~ in the working directory got the cache, the checkpoint went to $HOME)
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self._timeout = float(timeout)
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._inode: tuple[int, int] | None = None
        _CACHES.add(self)
        self._scalar("SELECT COUNT(*) FROM totals")  # opens (or sets aside and recreates) the file

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as where it is and its settings (its connection and lock stay behind): a worker
        process, or a framework that pickles an embedding class holding it, opens the same file."""
        return _reopened, (str(self.path), self.max_bytes, self._timeout)

    # -- connection ---------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._refuse_other_files()
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            foreign = _not_a_cache(conn)
            if foreign is not None:
                raise CacheAccessError(
                    f"the embedding cache {self.path} is {foreign}, not a poolrag cache; "
                    + way_out("another file")
                )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
            if _upgrade_once(conn, self.path):
                _shrink(conn, self.path)
            if self.max_bytes is not None:
                conn.execute("INSERT OR REPLACE INTO bound VALUES (0, ?)", (self.max_bytes,))
        except BaseException:
            conn.close()
            raise
        return conn

    def _refuse_other_files(self) -> None:
        """A file that is not SQLite at all is another file given by mistake (a typo in
        ``--cache``), not a damaged cache: refused, never moved aside and replaced."""
        try:
            with self.path.open("rb") as handle:
                head = handle.read(len(_SQLITE_HEADER))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return  # created here, or the open below names what is wrong
        if head and head != _SQLITE_HEADER[: len(head)]:
            raise CacheAccessError(
                f"{self.path} is not an SQLite database, so not an embedding cache; "
                + way_out("another file")
            )

    def _connection(self) -> sqlite3.Connection:
        # A connection must not cross fork(): a child process opens its own.
        if self._conn is None or self._pid != os.getpid():
            try:
                self._conn = self._open()
            except sqlite3.DatabaseError as exc:
                self._set_aside(exc)
                self._conn = self._open()
            except OSError as exc:  # the folder cannot be created
                _raise_access(self.path, exc, self._timeout)
            self._pid = os.getpid()
            self._inode = _inode(self.path)
        return self._conn

    def _set_aside(self, exc: sqlite3.DatabaseError) -> None:
        """Move a corrupt file (and its WAL) aside so the next open starts a fresh cache; raise any
        other database error, as the user's to fix."""
        if not is_corruption(exc):
            _raise_access(self.path, exc, self._timeout)
        if self._conn is not None and self._pid == os.getpid():
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        if self._inode is not None and _inode(self.path) != self._inode:
            logger.warning("embedding cache %s was replaced by another process; reopening", self.path)
            return
        aside = self.path.with_name(
            f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        )
        logger.warning(
            "embedding cache %s is damaged (%s); moved to %s, vectors will be recomputed",
            self.path,
            exc,
            aside,
        )
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.exists():
                os.replace(src, f"{aside}{suffix}")

    def _guarded(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` on the connection; on corruption found mid-file, set the file aside
        and run it once more on a fresh cache. Caller holds ``self._lock``."""
        try:
            return operation(self._connection())
        except sqlite3.DatabaseError as exc:
            self._set_aside(exc)
        return operation(self._connection())

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads --------------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors for the keys that are present and intact; corrupt entries are deleted."""
        unique = list(dict.fromkeys(keys))
        with self._lock:
            found = self._guarded(lambda conn: self._read(conn, unique))
        hits = sum(1 for k in keys if k in found)
        self.stats.hits += hits
        self.stats.misses += len(keys) - hits
        return found

    def _read(self, conn: sqlite3.Connection, unique: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        bad: list[bytes] = []
        for start in range(0, len(unique), _SQL_VARS):
            part = unique[start : start + _SQL_VARS]
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                f"SELECT key, dim, data, checksum FROM vectors WHERE key IN ({marks})", part
            ).fetchall()
            for key, dim, data, checksum in rows:
                vector = _intact_vector(key, dim, data, checksum)
                if vector is None:
                    bad.append(key)
                    continue
                found[key] = vector
        now = time.time_ns()
        if bad:
            logger.warning("embedding cache: %d corrupt entries dropped and will be recomputed", len(bad))
            self.stats.corrupt += len(bad)
        if found or bad:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("DELETE FROM vectors WHERE key = ?", [(k,) for k in bad])
                conn.executemany("UPDATE vectors SET last_used = ? WHERE key = ?", [(now, k) for k in found])
        return found

    # -- writes -------------------------------------------------------------------------------------
    def put_many(self, items: Mapping[bytes, np.ndarray] | Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store vectors in one transaction (all or nothing), then evict down to the size bound."""
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        if not pairs:
            return
        now = time.time_ns()
        rows = []
        for key, vector in pairs:
            arr = np.ascontiguousarray(vector, dtype="<f4")
            if arr.ndim != 1:
                raise ValueError("the embedding cache stores one-dimensional vectors")
            data = arr.tobytes()
            rows.append((key, arr.shape[0], data, _checksum(key, arr.shape[0], data), len(data), now))

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                # an upsert, not INSERT OR REPLACE: its update fires vectors_upd, so a key written
                # again (by another process that missed it too) is counted once in totals
                conn.executemany(
                    "INSERT INTO vectors (key, dim, data, checksum, nbytes, last_used) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET dim = excluded.dim, "
                    "data = excluded.data, checksum = excluded.checksum, nbytes = excluded.nbytes, "
                    "last_used = excluded.last_used",
                    rows,
                )
                self._evict(conn)

        with self._lock:
            self._guarded(write)
            self.stats.writes += len(rows)

    def _bound(self, conn: sqlite3.Connection) -> int:
        """This object's bound, else the one recorded in the file, else the default."""
        if self.max_bytes is not None:
            return self.max_bytes
        row = conn.execute("SELECT max_bytes FROM bound WHERE id = 0").fetchone()
        return DEFAULT_MAX_BYTES if row is None else int(row[0])

    def _evict(self, conn: sqlite3.Connection) -> None:
        (total,) = conn.execute("SELECT nbytes FROM totals WHERE id = 0").fetchone()
        bound = self._bound(conn)
        if total <= bound:
            return
        target = total - int(bound * _EVICT_TO)
        freed, victims = 0, []
        for key, nbytes in conn.execute("SELECT key, nbytes FROM vectors ORDER BY last_used, key"):
            victims.append((key,))
            freed += nbytes
            if freed >= target:
                break
        conn.executemany("DELETE FROM vectors WHERE key = ?", victims)
        self.stats.evicted += len(victims)
        logger.debug("embedding cache: evicted %d entries (%d bytes)", len(victims), freed)

    def clear(self) -> None:
        def wipe(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM vectors")

        with self._lock:
            self._guarded(wipe)

    # -- introspection ------------------------------------------------------------------------------
    def _scalar(self, sql: str) -> int:
        with self._lock:
            return int(self._guarded(lambda conn: conn.execute(sql).fetchone()[0]))

    def __len__(self) -> int:
        return self._scalar("SELECT COUNT(*) FROM vectors")

    @property
    def nbytes(self) -> int:
        """Vector bytes stored (what ``max_bytes`` bounds)."""
        return self._scalar("SELECT nbytes FROM totals WHERE id = 0")
