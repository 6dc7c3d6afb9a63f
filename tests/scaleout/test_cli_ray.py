"""``poolrag ingest ... --ray`` refuses, before it opens anything, the flags its Ray path does not
honour. The command run on Ray to the end (and killed, and resumed) is test_cli_ray_checkpoint.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_ray_ingest import write_corpus


def ingest(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", "ingest", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_flags_the_ray_path_does_not_honour_are_refused_before_any_work(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=1)
    store = ["--store", "qdrant", "--path", str(tmp_path / "q")]
    done = ingest(str(corpus), *store, "--hybrid", "--sparse-model", "x", "--ray")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "poolrag ingest: error: --ray --hybrid makes BM25 vectors; ingest with --sparse-model without --ray"
    )
    assert not (tmp_path / "q").exists()  # nothing was opened


def test_a_cluster_address_it_cannot_join_is_one_line_and_opens_nothing(tmp_path: Path) -> None:
    """A port nothing listens on kept Ray retrying for 14 minutes, a malformed address was a
    ValueError traceback, and either left an empty collection; Ray Data cannot run through Ray
    Client (ray://), which failed deep inside the run."""
    import socket

    corpus = write_corpus(tmp_path / "corpus", files=1)
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    cases = {
        f"127.0.0.1:{dead}": f"--ray 127.0.0.1:{dead}: nothing answers there",
        "bogus": "--ray bogus: give a cluster as HOST:PORT",
        "ray://127.0.0.1:10001": "--ray ray://127.0.0.1:10001: Ray Data does not run through Ray Client",
    }
    for address, said in cases.items():
        db = tmp_path / f"{len(said)}.db"
        done = ingest(str(corpus), "--uri", str(db), f"--ray={address}")
        assert done.returncode == 2, (address, done.stderr[-2000:])
        line = done.stderr.strip()
        assert line.startswith(f"poolrag ingest: error: {said}") and "\n" not in line, line
        assert not db.exists()  # the store was never opened


def test_serve_on_ray_with_its_port_taken_is_one_line_before_any_cluster(tmp_path: Path) -> None:
    """Ray Serve's proxy binds the port on this node: taken, that was a 111-line traceback."""
    import socket

    env = os.environ | {"HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "poolrag.cli", "serve", str(tmp_path), "--ray", "--port", str(port)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr[-2000:]
    assert done.stderr.startswith("poolrag serve: ") and "in use" in done.stderr


#: ``serve --ray`` on a cluster already serving, stopped by a signal while its replicas serve
STOPPED_BY = textwrap.dedent(
    """
    import os, signal, sys, time
    import poolrag.scaleout.cluster as cluster
    import poolrag.scaleout.ray_serve as ray_serve

    def serve_until_signalled(models, plan, *, host, port):
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        time.sleep(60)

    cluster.connect = lambda *args, **kwargs: None
    ray_serve.running_proxy_address = lambda: ("127.0.0.1", 8000)
    ray_serve.serve_models_on_ray = serve_until_signalled
    from poolrag.cli import main
    sys.exit(main(["serve", sys.argv[1], "--ray", "auto", "--log-level", "warning"]))
    """
)


@pytest.mark.parametrize(("signal_name", "status"), [("SIGTERM", 143), ("SIGINT", 0)])
def test_serve_on_ray_exits_as_serve_does_after_a_signal(
    minilm_path: Path, signal_name: str, status: int
) -> None:
    """143 after SIGTERM, 0 after Ctrl-C, as uvicorn and ``poolrag serve`` without --ray (it exited
    130 on both, so a service manager read a SIGTERM as an interrupt)."""
    env = os.environ | {"HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_BY, str(minilm_path), signal_name],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == status, done.stderr[-2000:]


#: ``poolrag ingest --ray --json`` whose first actor prints a line and dies (as an out-of-memory
#: kill ends one) on its first batch: Ray restarts it and forwards both the print and its own notes
DIES_ONCE = textwrap.dedent(
    """
    import functools, os, sys
    import poolrag.scaleout.ray_ingest as ray_ingest

    class PrintsAndDiesOnce(ray_ingest.ChunkEmbedder):
        flag = sys.argv[2]  # read here: the actor's own sys.argv is its worker's

        def __call__(self, batch):
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return super().__call__(batch)
            print("a line a worker printed", flush=True)
            os._exit(1)

    ray_ingest.ingest_on_ray = functools.partial(ray_ingest.ingest_on_ray, embedder_class=PrintsAndDiesOnce)
    from poolrag.cli import main
    sys.exit(main(["ingest", *sys.argv[3:], "--json", "--ray", "--ray-workers", "1"]))
    """
)


def test_the_json_report_is_all_that_ingest_on_ray_prints_on_stdout(
    no_cluster_in_process, minilm_path: Path, tmp_path: Path
) -> None:
    """Ray forwards its workers' and raylet's stdout (a dead actor's retry notes) to the command's
    stdout: they came before and after the --json report, and `| jq` failed on them."""
    corpus = write_corpus(tmp_path / "corpus", files=2)
    flag = tmp_path / "died"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled"}
    args = [str(corpus), "--model", str(minilm_path), "--uri", str(tmp_path / "m.db"), "--no-cache"]
    done = subprocess.run(
        [sys.executable, "-c", DIES_ONCE, "-", str(flag), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert flag.exists() and "a line a worker printed" in done.stderr  # the actor did die, and said so
    report = json.loads(done.stdout)  # one JSON document, nothing else
    assert report["documents"] == report["upserted"] == report["chunks"] == 2


def test_the_one_line_of_ray_cores_a_quiet_run_prints_is_the_one_the_readme_explains(
    no_cluster_in_process, minilm_path: Path, tmp_path: Path
) -> None:
    """A clean --ray ingest printed an `E ... core_worker.cc` line of Ray Core's that looks like a
    failure and was explained nowhere (Ray says it of every Ray Data actor pool, and no setting
    turns it off alone), and with -q Ray Data's WARNING that its progress bars were off, saying how
    to turn them on. Any other line of Ray's on a clean run is new, and needs a word too."""
    corpus = write_corpus(tmp_path / "corpus", files=2)
    done = ingest(str(corpus), "--model", str(minilm_path), "--uri", str(tmp_path / "m.db"), "-q", "--ray")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ingested 2 documents")
    said = "has constructor arguments in the object store and max_restarts > 0"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "core_worker.cc" in lines[0] and said in lines[0], done.stderr
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    quoted = "core_worker.cc: Actor with class name: 'MapWorker(MapBatches(ChunkEmbedder))' ..."
    assert f"{quoted} {said}" in readme
