"""One process measures a model on a machine at a time: another waits for its turn, a holder that
dies lets go with its process, and a cache that cannot hold the lock leaves measuring unguarded.

The holder is a real second process; the key is a real :class:`TuneKey`, so the lock lies where a
load's would, beside the verdict."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from poolrag.core.measuring_turn import measuring_turn
from poolrag.core.tune_verdicts import TuneKey

KEY = TuneKey("fingerprint", "settings", "machine", "torch", 2)
HOLDER = textwrap.dedent(
    """
    import sys, time
    from poolrag.core.measuring_turn import measuring_turn
    from poolrag.core.tune_verdicts import TuneKey
    key = TuneKey(*sys.argv[1:5], int(sys.argv[5]))
    with measuring_turn(key, lambda: time.sleep(0.05), print) as waited:
        print("holding", waited, flush=True)
        time.sleep(600)
    """
)


@pytest.fixture
def tune_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    return KEY.path().parent


def test_a_process_waits_while_another_measures_and_goes_on_once_that_one_is_killed(tune_dir: Path) -> None:
    fields = [KEY.model_fingerprint, KEY.settings, KEY.machine, KEY.torch_version, str(KEY.threads)]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, *fields], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().split() == ["holding", "False"]
        said: list[str] = []
        waits = 0

        def wait() -> None:
            nonlocal waits
            waits += 1
            if waits == 3:
                holder.kill()  # SIGKILL: no clean-up of its own
            time.sleep(0.05)

        with measuring_turn(KEY, wait, said.append) as waited:
            assert waited and waits >= 3  # the turn came only once the holder was killed
            assert holder.wait(60) == -signal.SIGKILL
            assert [p.name for p in tune_dir.iterdir()] == [f".{KEY.path().stem}.measuring"]
    finally:
        holder.kill()
        holder.wait()
    assert said == [
        f"another process (pid {holder.pid}) is measuring this model on this machine: waiting for its verdict"
    ]
    assert not list(tune_dir.iterdir())  # the turn's file goes with the turn


def test_nobody_measuring_means_no_wait(tune_dir: Path) -> None:
    def never() -> None:
        raise AssertionError("waited with nobody measuring")

    with measuring_turn(KEY, never, never) as waited:  # type: ignore[arg-type]
        assert not waited
        taken = measuring_turn(KEY, never, lambda sentence: None)
        with pytest.raises(AssertionError, match="waited with nobody"):  # the turn is held now
            taken.__enter__()


def test_a_cache_that_cannot_hold_the_lock_measures_unguarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("POOLRAG_CACHE_DIR", str(tmp_path / "a-file" / "cache"))

    def never(*args: object) -> None:
        raise AssertionError("waited for a lock that cannot exist")

    with measuring_turn(KEY, never, never) as waited:
        assert not waited
