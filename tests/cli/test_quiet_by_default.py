"""What a user's terminal shows besides poolrag's own lines: nothing. No third-party progress bar or
warning while a model loads (transformers' ``Loading weights`` bar, torchao's and torch's build
warnings where torchao is installed, as in the test extra), no hint contradicting the user's own
``HF_HUB_OFFLINE=1`` (the hub's "set HF_HUB_OFFLINE=0"), for ``Engine(...)`` in a script,
``poolrag ingest`` and ``poolrag serve`` start-up; and the one line a first load prints so that
its background measurement is not a silent wait.

Each runs in its own process, as a user runs it, on an empty poolrag cache with tuning at its
default, so the first load's measurement (which loads transformers' modules) happens too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from milvus_server import free_port

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"  # the packaged copy, offline
# what third parties print on a load: bars, warnings, torch's own log prefix, the hub's hint
NOISE = ("Loading weights", "%|", "Warning", "Failed to load", "_pytree", "HF_HUB_OFFLINE=0")
MEASURING = "measuring its fastest exact path in the background; serving on the default path meanwhile"
WAIT_S = 900  # a ceiling for a busy machine


def _env(tmp_path: Path) -> dict[str, str]:
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "POOLRAG_CACHE_DIR": str(tmp_path / "poolrag-cache"),
    }
    env.pop("POOLRAG_TUNE", None)  # the suite's "off": a user gets "auto"
    return env


def _noise(stderr: str) -> list[str]:
    """Third parties' lines; poolrag's own ingest bar (tests/ingest/test_ingest_progress.py) is not."""
    lines = stderr.replace("\r", "\n").splitlines()
    ours = [line for line in lines if not line.startswith("ingesting:")]
    return [line for line in ours if any(word in line for word in NOISE)]


def test_an_engine_in_a_script_prints_nothing(tmp_path: Path) -> None:
    script = (
        "from poolrag import Engine\n"
        f"engine = Engine({HUB_ID!r})\n"
        "engine.embed_array(['hello world'])\n"
        "print(engine.wait_for_tune().state)\n"  # transformers' modules were loaded and timed too
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=_env(tmp_path), capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "measured"
    assert done.stderr == ""


def test_a_load_that_measures_before_it_returns_says_so_in_a_script(tmp_path: Path, tiny_model) -> None:
    """cpu_fast_mode="auto" times the fast modes before the engine serves: seconds to a minute that
    a bare script, whose logging shows no INFO, must not spend in silence."""
    script = f"from poolrag import Engine\nEngine({str(tiny_model('bert'))!r}, cpu_fast_mode='auto')\n"
    done = subprocess.run(
        [sys.executable, "-c", script], env=_env(tmp_path), capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("timing its paths before serving") == 1, done.stderr


def _ingest(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for i in range(3):
        (docs / f"note-{i}.txt").write_text(f"Note {i}: pooling models turn text into vectors for search.")
    return _poolrag(tmp_path, "ingest", str(docs), "--model", HUB_ID, "--uri", str(tmp_path / "m.db"), *flags)


def _poolrag(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``poolrag COMMAND`` run as a user runs it, its output piped."""
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *command],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )


def test_poolrag_ingest_quiet_prints_nothing_but_its_report(tmp_path: Path) -> None:
    # transformers' modules load here (the other path's load is what a first load adds)
    done = _ingest(tmp_path, "-q", "--model-impl", "transformers")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ingested 3 documents")
    assert done.stderr == ""


def test_poolrag_ingest_says_once_that_a_first_load_measures_in_the_background(tmp_path: Path) -> None:
    done = _ingest(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count(MEASURING) == 1, done.stderr
    assert _noise(done.stderr) == []


def test_poolrag_search_measures_nothing_on_a_first_load(tmp_path: Path) -> None:
    """One query's process ends before a background measurement could, which would slow the query
    and be thrown away: ``search`` uses a verdict on disk (``--autotune cached``) and says nothing."""
    assert _ingest(tmp_path, "-q", "--autotune", "off").returncode == 0
    query = ["search", "vectors for search", "--model", HUB_ID, "--uri", str(tmp_path / "m.db"), "-k", "1"]
    done = _poolrag(tmp_path, *query)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(" 1. ") and "note-" in done.stdout
    assert MEASURING not in done.stderr and _noise(done.stderr) == []
    assert not (tmp_path / "poolrag-cache" / "tune").exists()


def test_poolrag_serve_starts_without_third_party_noise(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.err"
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "poolrag.cli", "serve", HUB_ID, "--port", str(port)],
            env=_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + WAIT_S
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        answer = httpx.post(f"{url}/v1/embeddings", json={"input": "hello", "model": HUB_ID}, timeout=60)
        assert answer.status_code == 200, answer.text
        # the first load's measurement loads transformers' modules in the background: wait for it
        while "measured in " not in log.read_text() and time.monotonic() < deadline:
            assert server.poll() is None, log.read_text()[-3000:]
            time.sleep(1)
    finally:
        server.terminate()
        server.wait(60)
    text = log.read_text()
    assert "measured in " in text and text.count(MEASURING) == 1, text[-3000:]
    assert "HF_HUB_OFFLINE is set: using the copy installed as a package" in text
    assert _noise(text) == []


def _ingest_at_a_terminal(tmp_path: Path, model: Path, *flags: str) -> str:
    """What ``poolrag ingest`` writes on stderr when stderr is a terminal (a pseudo-terminal here,
    100 columns wide: tqdm draws no bar on a terminal of width 0)."""
    import fcntl
    import pty
    import struct
    import termios

    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "note.txt").write_text("Pooling models turn text into vectors for search.")
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--autotune", "off", "--no-cache"]
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    with os.fdopen(leader, "rb", buffering=0) as terminal:
        done = subprocess.Popen(
            [sys.executable, "-m", "poolrag.cli", "ingest", str(docs), "--model", str(model), *store, *flags],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        said = b""
        while True:
            try:
                chunk = terminal.read(4096)
            except OSError:  # the last writer closed the terminal (EIO on Linux)
                break
            if not chunk:
                break
            said += chunk
        assert done.wait(WAIT_S) == 0, said.decode()[-3000:]
    return said.decode()


def test_poolrag_ingest_at_a_terminal_names_the_model_it_loads(tmp_path: Path, minilm_path: Path) -> None:
    """A load is seconds (here) to minutes (a download, gigabytes of weights) that a user at a
    terminal could not tell from a hang: one line names the model first; ``-q`` leaves it out."""
    said = _ingest_at_a_terminal(tmp_path, minilm_path)
    assert said.count(f"loading {minilm_path} on cpu") == 1, said
    assert "loading" not in _ingest_at_a_terminal(tmp_path, minilm_path, "-q")


def test_poolrag_ingest_piped_keeps_stderr_to_its_bar(tmp_path: Path, minilm_path: Path) -> None:
    """Piped (CI logs, scripts reading a failure's one line), no line about the load."""
    (tmp_path / "a.txt").write_text("Pooling models turn text into vectors for search.")
    store = ["--store", "qdrant", "--path", str(tmp_path / "q"), "--autotune", "off", "--no-cache"]
    command = ["ingest", str(tmp_path / "a.txt"), "--model", str(minilm_path), *store]
    done = _poolrag(tmp_path, *command)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loading" not in done.stderr, done.stderr


def test_poolrag_serve_names_each_model_before_it_loads(tmp_path: Path, minilm_path: Path) -> None:
    """As vLLM's serve does, the log says what it loads before the load's silence, not only after."""
    port = free_port()
    log = tmp_path / "serve.err"
    command = ["serve", str(minilm_path), "--port", str(port), "--autotune", "off"]
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "poolrag.cli", *command],
            env=_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while "Uvicorn running on" not in log.read_text() and time.monotonic() < deadline:
            assert server.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(60)
    text = log.read_text()
    assert text.count(f"loading {minilm_path} on cpu") == 1, text[-3000:]
    assert text.index(f"loading {minilm_path}") < text.index("loaded BertModel"), text[-3000:]


def _as_a_terminal_shows(written: str) -> list[str]:
    """The lines a terminal shows for ``written``: a carriage return goes back to the line's start,
    and what follows overwrites what was there."""
    shown = []
    for line in written.replace("\r\n", "\n").split("\n"):
        screen = ""
        for piece in line.split("\r"):
            screen = piece + screen[len(piece) :]
        shown.append(screen.rstrip())
    return shown


def test_a_warning_during_ingest_goes_above_the_bar_at_a_terminal(tmp_path: Path, minilm_path: Path) -> None:
    """A file skipped while the bar is drawn: its line stands on its own, the bar is drawn again
    below it, not the warning glued to the end of the half-drawn bar."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a-broken.pdf").write_text("not a pdf")
    (tmp_path / "docs" / "b.txt").write_text("Bees dance to say where the flowers are.")
    shown = _as_a_terminal_shows(_ingest_at_a_terminal(tmp_path, minilm_path))
    (warning,) = [line for line in shown if "skipping" in line]
    assert warning.startswith("WARNING poolrag.ingest.readers: skipping"), shown
    assert any(line.startswith("ingesting: 100%") for line in shown[shown.index(warning) :]), shown
