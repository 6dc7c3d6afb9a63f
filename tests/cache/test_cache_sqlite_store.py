"""EmbeddingCache: the on-disk store itself (no model involved)."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import sqlite3
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from disk_faults import empty_filler, fill_to, free_bytes, small_disk

from poolrag.cache import EmbeddingCache
from poolrag.cache.recovery import CacheAccessError, CacheBusyError
from poolrag.cli.command_errors import EXIT_UNAVAILABLE, report_error
from poolrag.errors import InvalidInputError


def _key(i: int) -> bytes:
    return i.to_bytes(4, "little") * 8


def _vec(i: int, dim: int = 16) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(dim).astype(np.float32)


def test_vectors_round_trip_bit_exact_and_misses_are_absent(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    cache.put_many({_key(i): _vec(i) for i in range(5)})
    found = cache.get_many([_key(i) for i in range(7)])
    assert sorted(found) == sorted(_key(i) for i in range(5))
    for i in range(5):
        assert found[_key(i)].dtype == np.float32
        assert np.array_equal(found[_key(i)], _vec(i))
    assert (cache.stats.hits, cache.stats.misses) == (5, 2)
    assert len(cache) == 5 and cache.nbytes == 5 * 16 * 4


def test_vectors_are_stored_as_raw_float32_not_pickles(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    EmbeddingCache(path).put_many({_key(1): _vec(1)})
    with sqlite3.connect(path) as conn:
        (data,) = conn.execute("SELECT data FROM vectors").fetchone()
    assert data == _vec(1).astype("<f4").tobytes()


def test_persists_across_instances(tmp_path: Path) -> None:
    EmbeddingCache(tmp_path / "c.sqlite").put_many({_key(1): _vec(1)})
    again = EmbeddingCache(tmp_path / "c.sqlite")
    assert np.array_equal(again.get_many([_key(1)])[_key(1)], _vec(1))


def test_flipped_bit_is_detected_dropped_and_reported_as_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many({_key(1): _vec(1), _key(2): _vec(2)})
    with sqlite3.connect(path) as conn:
        (data,) = conn.execute("SELECT data FROM vectors WHERE key = ?", (_key(1),)).fetchone()
        broken = bytearray(data)
        broken[5] ^= 0x10
        conn.execute("UPDATE vectors SET data = ? WHERE key = ?", (bytes(broken), _key(1)))
    found = cache.get_many([_key(1), _key(2)])
    assert list(found) == [_key(2)]
    assert cache.stats.corrupt == 1
    assert len(cache) == 1  # the bad entry is gone, so the next put replaces it cleanly


def test_an_entry_moved_under_another_key_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many({_key(1): _vec(1), _key(2): _vec(2)})
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT data, checksum FROM vectors WHERE key = ?", (_key(2),)).fetchone()
        conn.execute("UPDATE vectors SET data = ?, checksum = ? WHERE key = ?", (*row, _key(1)))
    assert _key(1) not in cache.get_many([_key(1)])
    assert cache.stats.corrupt == 1


def test_a_file_that_is_not_sqlite_at_all_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """A typo in ``--cache`` (notes.md) was moved aside as a damaged cache and replaced by one."""
    path = tmp_path / "notes.md"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CacheAccessError, match=r"notes\.md is not an SQLite database"):
        EmbeddingCache(path)
    assert path.read_bytes() == b"this is not sqlite" * 100
    assert [p.name for p in tmp_path.iterdir()] == ["notes.md"]


def test_another_programs_sqlite_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """Another program's database got poolrag's tables, triggers and WAL mode added, or, holding a
    ``vectors`` table of its own, failed with a traceback."""
    for name, table in (("app.db", "users(id, name)"), ("app2.db", "vectors(id INTEGER PRIMARY KEY, name)")):
        path = tmp_path / name
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute(f"CREATE TABLE {table}")
            conn.commit()
        before = path.read_bytes()
        with pytest.raises(CacheAccessError, match="an SQLite database of another program"):
            EmbeddingCache(path)
        assert path.read_bytes() == before and not Path(f"{path}-wal").exists()


def test_a_cache_written_before_caches_were_marked_is_still_a_cache(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many({_key(1): _vec(1)})
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA application_id = 0")  # as every cache before the mark
        conn.commit()
    with EmbeddingCache(path) as cache:
        assert _key(1) in cache.get_many([_key(1)])


def test_a_cache_locked_past_the_timeout_is_one_error_saying_so(tmp_path: Path) -> None:
    """A write lock held past the timeout was a raw sqlite3.OperationalError: a traceback, exit 1."""
    path = tmp_path / "c.sqlite"
    EmbeddingCache(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CacheBusyError, match=r"stayed locked by another process for 0\.2 s"):
            EmbeddingCache(path, timeout=0.2).put_many({_key(1): _vec(1)})
    finally:
        holder.close()
    assert report_error("search", CacheBusyError("x")) == EXIT_UNAVAILABLE


def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    with pytest.raises(ValueError, match="one-dimensional"):
        cache.put_many([(_key(1), _vec(1)), (_key(2), np.zeros((2, 2), np.float32))])
    assert len(cache) == 0


def test_size_bound_evicts_least_recently_used(tmp_path: Path) -> None:
    entry = 16 * 4
    cache = EmbeddingCache(tmp_path / "c.sqlite", max_bytes=10 * entry)
    for i in range(10):
        cache.put_many({_key(i): _vec(i)})
    cache.get_many([_key(0)])  # key 0 is now the most recently used
    cache.put_many({_key(10): _vec(10)})
    assert cache.nbytes <= 10 * entry
    present = cache.get_many([_key(i) for i in range(11)])
    assert _key(0) in present and _key(10) in present
    assert _key(1) not in present  # the oldest untouched entry went first
    assert cache.stats.evicted >= 1


def _writer(path: str, worker: int) -> None:
    cache = EmbeddingCache(path, timeout=60)
    for round_ in range(20):
        # Overlapping keys (shared) and private ones, written concurrently by every worker.
        cache.put_many(
            {
                _key(1000 + round_): _vec(1000 + round_),
                _key(worker * 100 + round_): _vec(worker * 100 + round_),
            }
        )
        cache.get_many([_key(1000 + round_)])


def test_several_processes_share_one_cache_safely(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    EmbeddingCache(path)  # create the schema once, like a first run would
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(1, 4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    cache = EmbeddingCache(path)
    keys = [_key(1000 + r) for r in range(20)] + [_key(w * 100 + r) for w in range(1, 4) for r in range(20)]
    found = cache.get_many(keys)
    assert len(found) == len(keys) and cache.stats.corrupt == 0
    assert all(np.array_equal(found[k], _vec(int.from_bytes(k[:4], "little"))) for k in keys)


_INHERITED: EmbeddingCache | None = None  # what a forked worker finds, as a module global of the parent


def _read_in_child(keys: list[bytes]) -> dict[bytes, np.ndarray]:
    assert _INHERITED is not None
    return _INHERITED.get_many(keys)


def _in_a_cache_call(cache: EmbeddingCache, inside: threading.Event) -> None:
    with cache._lock:  # as a thread in the middle of a read or write holds it
        inside.set()
        time.sleep(1)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_worker_forked_while_a_thread_used_the_cache_reads_it(tmp_path: Path) -> None:
    """A thread of the parent in the middle of a read or write at the fork (an app re-embedding
    cached texts on a thread while a ``fork`` Pool starts) does not exist in the child, which waited
    forever for the cache's lock on its first lookup (5 forks in 5 hung)."""
    global _INHERITED
    _INHERITED = EmbeddingCache(tmp_path / "c.sqlite")
    _INHERITED.put_many({_key(1): _vec(1)})
    inside = threading.Event()
    user = threading.Thread(target=_in_a_cache_call, args=(_INHERITED, inside))
    user.start()
    try:
        inside.wait(30)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            found = pool.apply_async(_read_in_child, ([_key(1)],)).get(timeout=60)
        assert np.array_equal(found[_key(1)], _vec(1))
        assert np.array_equal(_INHERITED.get_many([_key(1)])[_key(1)], _vec(1))  # the parent's still works
    finally:
        user.join()
        _INHERITED = None


def test_a_size_written_as_a_whole_float_is_a_byte_count(tmp_path: Path) -> None:
    assert EmbeddingCache(tmp_path / "c.sqlite", max_bytes=2e9).max_bytes == 2_000_000_000
    with pytest.raises(InvalidInputError, match="max_bytes must be a positive integer"):
        EmbeddingCache(tmp_path / "d.sqlite", max_bytes=2.5)


def test_the_size_bound_is_the_files_so_a_run_that_does_not_say_keeps_it(tmp_path: Path) -> None:
    """Each writer applied its own bound: a plain ``poolrag search`` (default 1 GiB) cut a cache an
    ingest had filled under ``--cache-max-gb 10``, and a smaller default cut the rest."""
    path = tmp_path / "c.sqlite"
    entry = 16 * 4  # one _vec's bytes
    with EmbeddingCache(path, max_bytes=100 * entry) as big:
        big.put_many({_key(i): _vec(i) for i in range(80)})
    with EmbeddingCache(path) as plain:  # no bound given: the file's
        assert plain.max_bytes is None
        plain.put_many({_key(1000): _vec(1000)})
        assert len(plain) == 81 and plain.stats.evicted == 0
    with EmbeddingCache(path, max_bytes=40 * entry) as small:  # said: applied, and recorded
        small.put_many({_key(1001): _vec(1001)})
        assert len(small) == 36  # evicted down to 90 % of the new bound
    with EmbeddingCache(path) as plain:
        plain.put_many({_key(i): _vec(i) for i in range(2000, 2010)})
        assert len(plain) <= 40


def _write_same_keys(path: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait()
    EmbeddingCache(path, timeout=60).put_many({_key(i): _vec(i) for i in range(50)})


def test_a_key_two_processes_both_write_is_counted_once(tmp_path: Path) -> None:
    """Two ingests of one corpus at once both miss and both write each chunk: the second write
    counted its bytes again (SQLite's REPLACE fires no delete trigger), so ``nbytes`` doubled and a
    bounded cache evicted entries it had room for."""
    path = str(tmp_path / "c.sqlite")
    entry = 16 * 4
    EmbeddingCache(path, max_bytes=60 * entry)  # room for all 50 entries and 10 more
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_write_same_keys, args=(path, start)) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    with EmbeddingCache(path) as cache:
        assert len(cache) == 50 and cache.nbytes == 50 * entry
        cache.put_many({_key(i): _vec(i) for i in range(100, 105)})
        assert cache.stats.evicted == 0 and len(cache.get_many([_key(i) for i in range(50)])) == 50


#: The table every poolrag before the compact layout wrote (its vectors spilled out of their pages).
_OLDER_POOLRAGS_TABLE = """CREATE TABLE vectors (
    key BLOB PRIMARY KEY, dim INTEGER NOT NULL, data BLOB NOT NULL, checksum BLOB NOT NULL,
    nbytes INTEGER NOT NULL, last_used INTEGER NOT NULL) WITHOUT ROWID"""
_OLDER_POOLRAGS_TRIGGERS = """
CREATE INDEX vectors_last_used ON vectors(last_used);
CREATE TRIGGER vectors_ins AFTER INSERT ON vectors
    BEGIN UPDATE totals SET nbytes = nbytes + NEW.nbytes WHERE id = 0; END;
CREATE TRIGGER vectors_del AFTER DELETE ON vectors
    BEGIN UPDATE totals SET nbytes = nbytes - OLD.nbytes WHERE id = 0; END;
"""


def _as_an_older_poolrag_wrote(path: Path, user_version: int) -> None:
    """Rewrite the cache at ``path`` in the layout older poolrag wrote, keeping its rows."""
    columns = "key, dim, data, checksum, nbytes, last_used"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        conn.execute(_OLDER_POOLRAGS_TABLE.replace("vectors", "older", 1))
        conn.execute(f"INSERT INTO older ({columns}) SELECT {columns} FROM vectors")
        conn.execute("DROP TABLE vectors")
        conn.execute("ALTER TABLE older RENAME TO vectors")
        for statement in _OLDER_POOLRAGS_TRIGGERS.split(";\n"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {user_version}")
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _file_bytes(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def test_the_file_stays_near_the_size_of_its_vectors(tmp_path: Path) -> None:
    """A 384-dimension vector is 1,536 bytes: two fit a 4 KiB page, where a WITHOUT ROWID table
    spilled each into overflow pages of its own (3.1x the vectors' bytes)."""
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many({_key(i): _vec(i, 384) for i in range(600)})
    assert _file_bytes(path) < 1.6 * 600 * 384 * 4


def test_a_file_an_older_poolrag_wrote_keeps_its_vectors_and_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many({_key(i): _vec(i, 384) for i in range(600)})
    _as_an_older_poolrag_wrote(path, user_version=1)
    before = _file_bytes(path)
    with EmbeddingCache(path) as cache:
        found = cache.get_many([_key(i) for i in range(600)])
        assert len(found) == 600 and cache.stats.corrupt == 0
        assert all(np.array_equal(found[_key(i)], _vec(i, 384)) for i in range(600))
        assert cache.nbytes == 600 * 384 * 4
        cache.put_many({_key(1000): _vec(1000, 384)})
        assert len(cache) == 601 and cache.nbytes == 601 * 384 * 4
    assert _file_bytes(path) < min(0.6 * before, 1.6 * 601 * 384 * 4)


def _layout(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()
    return "older" if "WITHOUT ROWID" in sql else "compact"


def test_a_disk_without_room_to_move_an_older_file_keeps_it_working_until_there_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk", 16 << 20) as disk:
        path = disk / "c.sqlite"
        with EmbeddingCache(path) as cache:
            cache.put_many({_key(i): _vec(i, 384) for i in range(600)})
        _as_an_older_poolrag_wrote(path, user_version=1)
        fill_to(disk, 600 << 10)  # room for some reads and writes, not for a copy of 600 vectors
        caplog.set_level(logging.WARNING, logger="poolrag.cache.sqlite_store")
        with EmbeddingCache(path) as cache:
            assert len(cache.get_many([_key(i) for i in range(0, 600, 12)])) == 50
            cache.put_many({_key(1000): _vec(1000, 384)})
        assert "keeps its older, larger layout for now" in caplog.text
        assert _layout(path) == "older"
        empty_filler(disk)
        with EmbeddingCache(path) as cache:
            assert len(cache) == 601 and cache.nbytes == 601 * 384 * 4
        assert _layout(path) == "compact" and _file_bytes(path) < 1.6 * 601 * 384 * 4


@pytest.mark.parametrize("room", [0.2, 1.8], ids=["no-room-to-copy", "room-to-copy-not-to-check-in"])
def test_a_move_the_disk_has_too_little_room_for_leaves_the_disk_its_free_bytes(
    tmp_path: Path, room: float
) -> None:
    """The store an ingest fills shares the cache's disk: a move that cannot finish must not take
    the disk's last bytes, neither while the cache is open nor after it closes (with ``room`` times
    the file free, a move commits into the WAL, then the file cannot grow to take it in)."""
    with small_disk(tmp_path / "disk", 16 << 20) as disk:
        path = disk / "c.sqlite"
        with EmbeddingCache(path) as cache:
            cache.put_many({_key(i): _vec(i, 384) for i in range(600)})
        _as_an_older_poolrag_wrote(path, user_version=1)
        free = int(room * path.stat().st_size)
        fill_to(disk, free)
        with EmbeddingCache(path) as cache:
            assert free_bytes(disk) > free - (100 << 10)
            assert len(cache.get_many([_key(i) for i in range(0, 600, 12)])) == 50
        assert free_bytes(disk) > free - (100 << 10)
        assert _layout(path) == "older"


def _read_all_and_write_one(path: str, start: multiprocessing.synchronize.Event, n: int) -> None:
    start.wait()
    with EmbeddingCache(path, timeout=60) as cache:
        found = cache.get_many([_key(i) for i in range(200)])
        assert len(found) == 200 and all(np.array_equal(found[_key(i)], _vec(i, 384)) for i in range(200))
        cache.put_many({_key(1000 + n): _vec(1000 + n, 384)})


def test_processes_opening_an_older_file_at_once_move_it_once_and_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many({_key(i): _vec(i, 384) for i in range(200)})
    _as_an_older_poolrag_wrote(path, user_version=1)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_read_all_and_write_one, args=(str(path), start, n)) for n in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with EmbeddingCache(path) as cache:
        assert len(cache) == 203 and cache.nbytes == 203 * 384 * 4


def test_a_file_whose_count_an_older_poolrag_inflated_is_recounted(tmp_path: Path) -> None:
    """A cache older poolrag wrote keys into twice (INSERT OR REPLACE, as it did) counts phantom
    bytes; past 90 % of the bound they made every write evict the whole cache."""
    path = tmp_path / "c.sqlite"
    entry = 16 * 4
    EmbeddingCache(path, max_bytes=20 * entry).close()
    _as_an_older_poolrag_wrote(path, user_version=0)
    row = (_key(1), 16, _vec(1).tobytes(), b"x" * 16, entry, 1)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for _ in range(30):
            conn.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?, ?)", row)
    with EmbeddingCache(path) as cache:
        assert cache.nbytes == entry
        cache.put_many({_key(i): _vec(i) for i in range(2, 12)})
        assert len(cache) == 11 and cache.stats.evicted == 0


def test_a_path_under_the_home_folder_is_there_not_in_a_folder_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``poolrag ingest --cache=~/c.sqlite`` (no shell expands ``~`` after ``=``) made a folder
    named ``~`` in the working directory, while the checkpoint went beside ``$HOME/c.sqlite``."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    with EmbeddingCache("~/cache/c.sqlite") as cache:
        cache.put_many({_key(1): _vec(1)})
        assert cache.path == home / "cache" / "c.sqlite"
    assert (home / "cache" / "c.sqlite").is_file() and list(work.iterdir()) == []
