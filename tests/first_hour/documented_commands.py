"""The commands and code blocks the docs give users, run as written in the environment they install.

A command is the one-line ``bash`` block right after an ``<!-- command: NAME -->`` marker; each one
starts with the ``pip install`` a user runs. Run as a script (by the ``first_hour`` nox session, in a
fresh virtualenv), this executes one such command in a fresh copy of the repository, offline, and with
``--top-hit`` runs it twice and checks what a user would look at: the search's top hit, and that the
second run embeds nothing. With ``--blocks`` it then runs every shell and Python block of README.md
and docs/*.md that runs under the same install (see doc_blocks.py) and is not marked
``<!-- not-run: why -->``, checking what each says it prints::

    python tests/first_hour/documented_commands.py README.md main --top-hit sourdough.md --blocks
    python tests/first_hour/documented_commands.py README.md server --blocks
    python tests/first_hour/documented_commands.py --print README.md tests   # what .ci/run runs

The blocks run as written, with three things set around them and nothing in them edited:

* hub ids of models no package ships are answered by the test-asset folders built from those
  models (``python scripts/build_test_assets.py``), through ``$POOLRAG_MODEL_MAP``, the mapping any
  user can set; ``HF_HUB_OFFLINE=1`` and a fresh ``$POOLRAG_CACHE_DIR``;
* ports: each port a page names (``127.0.0.1:8000``, ``--port 8001``) is a free one of this machine,
  and a ``poolrag serve`` without ``--port`` is given the page's 8000;
* servers: a page's first ``poolrag serve`` run in the foreground (the server its later ``curl``
  blocks call) is started in the background, must answer ``/health``, and is stopped when the page
  is done; a later one is started and stopped within its block, as is a server a block puts in the
  background (``&``) or a Python block's ``uvicorn.run``. A block whose server exits fails at once.

A block's install line is not run again inside it (the environment has it), and every block's shell
runs with ``set -e``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import Block, DocSet, Install, documented_outputs, print_claims, shell_items
from documented_output import json_documents, line_matches, line_mismatches, mismatches

ROOT = Path(__file__).resolve().parents[2]
#: hub ids the docs name whose weights no package ships -> the test-asset folder built from that
#: very model by scripts/build_test_assets.py (its sources.py names each folder's upstream)
TEST_ASSET_MODELS = {
    "cross-encoder/ms-marco-MiniLM-L-12-v2": "ms-marco-MiniLM-L-12-v2",
    "BAAI/bge-small-en-v1.5": "bge-small-en-v1.5",
}
ASSET_MARKER = ".poolrag-asset.json"
SHELL_BLOCK_SECONDS = 420
PYTHON_BLOCK_SECONDS = 600
SERVER_START_SECONDS = 300
_PORT_NAMED = re.compile(
    r"(?P<host>127\.0\.0\.1|localhost):(?P<port>\d{2,5})\b|(?P<flag>--port[ =]|port=)(?P<n>\d{2,5})\b"
)
_SERVE = re.compile(r"^poolrag serve\b")


def documented_command(doc: str, name: str) -> str:
    """The command marked ``name`` in ``doc`` (a path relative to the repository root)."""
    block = DocSet([doc]).command(doc, name)
    lines = [line for line in block.body.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(f"{doc}: command {name!r} must be one line, found {len(lines)}")
    return lines[0].strip()


def asset_root() -> Path:
    return Path(os.environ.get("POOLRAG_TEST_ASSETS") or "~/.cache/poolrag/test-assets").expanduser()


def model_map() -> str:
    """``$POOLRAG_MODEL_MAP`` for the blocks: each test-asset model that is built."""
    root = asset_root()
    built = {
        hub: root / folder
        for hub, folder in TEST_ASSET_MODELS.items()
        if (root / folder / ASSET_MARKER).is_file()
    }
    return ",".join(f"{hub}={folder}" for hub, folder in built.items())


def _copy_checkout(into: Path) -> None:
    """The files a fresh clone has: git's files when git is there (untracked ones that git does not
    ignore too, so a working tree's new modules come along), else the tree minus caches."""
    try:
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        ignore = shutil.ignore_patterns(".git", ".nox", ".venv*", "__pycache__", "*.db", "poolrag_*")
        shutil.copytree(ROOT, into, ignore=ignore, dirs_exist_ok=True)
        return
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            (into / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name.decode())


def _run(command: str, cwd: Path, env: dict[str, str]) -> str:
    print(f"$ {command}", flush=True)
    result = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    print(result.stdout, flush=True)
    if result.returncode != 0:
        sys.exit(f"the documented command failed with exit code {result.returncode}")
    return result.stdout


def _first_hit(output: str) -> str:
    """The source of rank 1 in ``poolrag search``'s output (`` 1. 0.6812  path [start:end]``)."""
    match = re.search(r"^\s*1\. -?\d+\.\d+\s+(\S+) \[", output, re.M)
    if match is None:
        sys.exit("the search printed no ranked hits")
    return Path(match[1]).name


# --- processes ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """The process and everything it started (its own session): TERM, then KILL what is left."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if process.poll() is not None and not _session_servers(process.pid, any_process=True):
                return
            time.sleep(0.2)


def _session_servers(session: int, any_process: bool = False) -> list[int]:
    """Live ``poolrag serve`` processes (or any, with ``any_process``) in a session (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) != session or fields[0] == "Z":
                continue
            args = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if any_process or any(
            (Path(arg.decode(errors="replace")).name == "poolrag" or arg == b"poolrag.cli")
            and args[at + 1 : at + 2] == [b"serve"]
            for at, arg in enumerate(args)
        ):
            found.append(int(stat.parent.name))
    return found


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path


def _start_server(command: list[str], port: int, cwd: Path, env: dict[str, str], log: Path) -> Server | str:
    """A server started in its own session, once it answers /health; else why not."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True)
    server, deadline = Server(process, port, log), time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if _health(port):
            return server
        if process.poll() is not None:
            return f"the server exited with code {process.returncode} before /health answered:\n{_tail(log)}"
        time.sleep(0.5)
    _stop(process)
    return f"/health did not answer within {SERVER_START_SECONDS} s:\n{_tail(log)}"


# --- running one page's blocks -------------------------------------------------------------------


@dataclass
class Page:
    """What the blocks of one page share: its ports, its server, its Python namespace."""

    doc: str
    install: Install
    cwd: Path
    env: dict[str, str]
    work: Path
    ports: dict[str, int] = field(default_factory=dict)
    server: Server | None = None
    python: subprocess.Popen[str] | None = None
    served_once: bool = False

    def port(self, documented: str) -> int:
        return self.ports.setdefault(documented, _free_port())

    def rewrite(self, text: str, fresh: dict[str, int] | None = None) -> str:
        """``text`` with the page's ports in place of the documented ones (``fresh``: a block's own)."""

        def mapped(match: re.Match[str]) -> str:
            documented = match["port"] or match["n"]
            port = fresh.setdefault(documented, _free_port()) if fresh is not None else self.port(documented)
            return f"{match['host']}:{port}" if match["host"] else f"{match['flag']}{port}"

        text = _PORT_NAMED.sub(mapped, text)
        if _SERVE.match(text) and not re.search(r"--port[ =]", text):
            port = fresh.setdefault("8000", _free_port()) if fresh is not None else self.port("8000")
            text = text.replace("poolrag serve", f"poolrag serve --port {port}", 1)
        return text

    def close(self) -> None:
        if self.server is not None:
            _stop(self.server.process)
        if self.python is not None:
            self.python.stdin.close()  # type: ignore[union-attr]
            _stop(self.python)  # type: ignore[arg-type]


def run_shell_block(block: Block, page: Page, number: int) -> list[str]:
    commands = [item for item in shell_items(block.body) if item.is_command]
    expected = documented_outputs(block.body)
    script, serve_last = ["set -e"], None
    for n, item in enumerate(commands):
        script.append(f"printf '\\n<<<doc-command {n}>>>\\n'")
        install = Install.parse(item.text)
        if install is not None and install.key == page.install.key:
            continue  # the environment has it
        if _SERVE.match(item.text) and not item.text.rstrip().endswith("&"):
            if n != len(commands) - 1:
                return [f"command {n + 1} runs `poolrag serve` in the foreground, which never returns"]
            serve_last = item.text
            continue
        script.append(page.rewrite(item.text))
    problems: list[str] = []
    fresh: dict[str, int] = {}
    if serve_last is not None and page.served_once:  # a second server: its own port, stopped below
        script.append(page.rewrite(serve_last, fresh) + " &")
        port = fresh["8000"] if "8000" in fresh else next(iter(fresh.values()))
        script.append(
            f"until curl -sf http://127.0.0.1:{port}/health > /dev/null; do "
            "kill -0 $! 2>/dev/null || { echo 'poolrag serve exited' >&2; exit 1; }; sleep 1; done"
        )
    out, err = page.work / f"{number}.out", page.work / f"{number}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            ["bash", "-c", "\n".join(script)],
            cwd=page.cwd,
            env=page.env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            problems += _wait_watching_servers(process, any(_SERVE.match(line) for line in script))
        finally:
            _stop(process)
    if process.returncode not in (0, None) and not problems:
        problems.append(f"exit code {process.returncode}")
    if problems:
        return [*problems, f"its stderr ends:\n{_tail(err)}"]
    if serve_last is not None and not page.served_once:
        page.served_once = True
        command = page.rewrite(serve_last)
        port = int(re.search(r"--port[ =](\d+)", command)[1])  # type: ignore[index]
        started = _start_server(["bash", "-c", command], port, page.cwd, page.env, page.work / "server.log")
        if isinstance(started, str):
            return [started]
        page.server = started
    segments = re.split(r"<<<doc-command (\d+)>>>\n", out.read_text(errors="replace"))
    printed = {int(segments[i]): segments[i + 1] for i in range(1, len(segments) - 1, 2)}
    for n, documented in expected.items():
        try:
            problems += [f"command {n + 1}: {p}" for p in mismatches(documented, printed.get(n, ""))]
        except ValueError as exc:
            problems.append(f"command {n + 1}: its documented output cannot be read ({exc})")
    for n, text in printed.items():
        shows_error = n in expected and '"error"' in expected[n]
        errors = [doc for doc in json_documents(text) if isinstance(doc, dict) and "error" in doc]
        if errors and not shows_error:
            problems.append(f"command {n + 1} answered an error: {json.dumps(errors[0])[:300]}")
    return problems


def _wait_watching_servers(process: subprocess.Popen[bytes], starts_server: bool) -> list[str]:
    """Waits for the block; a server it started that exits while the block still runs ends it (a
    ``until curl .../health`` loop would wait forever)."""
    began, seen = time.monotonic(), False
    while process.poll() is None:
        waited = time.monotonic() - began
        if waited > SHELL_BLOCK_SECONDS:
            return [f"still running after {SHELL_BLOCK_SECONDS} s"]
        if starts_server:
            alive = bool(_session_servers(process.pid))
            if seen and not alive:
                time.sleep(1)
                if process.poll() is None:
                    return ["the `poolrag serve` the block started exited, and the block waits for it"]
            seen = seen or alive
        time.sleep(0.3)
    return []


def run_python_block(block: Block, page: Page, number: int, docs: DocSet) -> list[str]:
    if "uvicorn.run(" in block.body:
        return _run_python_server(block, page, number)
    if page.python is None:
        page.python = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("python_blocks.py")), str(page.work)],
            cwd=page.cwd,
            env=page.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    (page.work / f"{number}.py").write_text(page.rewrite(block.body), encoding="utf-8")
    page.python.stdin.write(f"{number}\n")  # type: ignore[union-attr]
    page.python.stdin.flush()  # type: ignore[union-attr]
    reply = _read_line(page.python, PYTHON_BLOCK_SECONDS)
    if reply != f"done {number}":
        _stop(page.python)  # type: ignore[arg-type]
        page.python = None
        return [
            f"no answer within {PYTHON_BLOCK_SECONDS} s" if reply is None else f"the runner said {reply!r}"
        ]
    result = json.loads((page.work / f"{number}.json").read_text(encoding="utf-8"))
    if result["error"]:
        return [result["error"].strip()[-3000:]]
    printed = result["printed"]
    lines = [line.strip() for line in printed.splitlines()]
    problems = [
        f"# {claim} is not printed"
        for claim in print_claims(block.body)
        if not any(line_matches(claim, line) for line in lines)
    ]
    shown = docs.printed_output_block(block)
    if shown is not None:
        problems += line_mismatches([line for line in shown.body.splitlines() if line.strip()], printed)
    if problems:
        problems.append(f"printed:\n{printed[-2000:]}")
    return problems


def _read_line(process: subprocess.Popen[str], timeout: float) -> str | None:
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        if not selector.select(timeout):
            return None
    line = process.stdout.readline()  # type: ignore[union-attr]
    return line.strip() if line else None


def _run_python_server(block: Block, page: Page, number: int) -> list[str]:
    """A block that serves (``uvicorn.run``): started on a port of its own, must answer /health."""
    fresh: dict[str, int] = {}
    source = page.work / f"{number}.py"
    source.write_text(page.rewrite(block.body, fresh), encoding="utf-8")
    if not fresh:
        return ["it serves on no port the page names"]
    port = next(iter(fresh.values()))
    started = _start_server(
        [sys.executable, str(source)], port, page.cwd, page.env, page.work / f"{number}.log"
    )
    if isinstance(started, str):
        return [started]
    _stop(started.process)
    return []


def run_blocks(docs: DocSet, install: Install, checkout: Path, env: dict[str, str], work: Path) -> int:
    """Every block under ``install`` that is neither a command nor marked not-run; the number failed."""
    blocks = [b for b in docs.under(install) if b.runs_as and not {"not-run", "command"} & b.marks.keys()]
    wanted = {hub for hub in TEST_ASSET_MODELS if any(hub in b.body for b in blocks)}
    missing = [hub for hub in wanted if hub not in env.get("POOLRAG_MODEL_MAP", "")]
    if missing:
        sys.exit(
            f"the blocks name {', '.join(missing)}, whose test folders are not built under {asset_root()}: "
            "run python scripts/build_test_assets.py"
        )
    print(f"\n== {len(blocks)} blocks under pip install {install.name}", flush=True)
    failed, started = [], time.monotonic()
    pages: dict[str, Page] = {}
    try:
        for number, block in enumerate(blocks):
            if block.doc not in pages:
                for done in pages.values():
                    done.close()
                folder = work / f"page-{len(pages)}"
                folder.mkdir()
                pages[block.doc] = Page(block.doc, install, checkout, env, folder)
            page = pages[block.doc]
            began = time.monotonic()
            print(f"-- {block}", flush=True)
            run = run_shell_block if block.runs_as == "shell" else None
            problems = (
                run(block, page, number) if run is not None else run_python_block(block, page, number, docs)
            )
            seconds = time.monotonic() - began
            if problems:
                failed.append(block)
                print(f"FAIL ({seconds:.0f} s) {block}\n  " + "\n  ".join(problems), flush=True)
            else:
                print(f"ok   ({seconds:.0f} s) {block}", flush=True)
    finally:
        for page in pages.values():
            page.close()
    print(
        f"== {len(blocks) - len(failed)} of {len(blocks)} blocks ran as documented "
        f"in {time.monotonic() - started:.0f} s" + "".join(f"\n   failed: {b}" for b in failed),
        flush=True,
    )
    return len(failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc")
    parser.add_argument("name")
    parser.add_argument("--print", action="store_true", help="only print the command")
    parser.add_argument("--top-hit", help="file name the command's search must rank first (runs it twice)")
    parser.add_argument("--blocks", action="store_true", help="then run the blocks under the same install")
    args = parser.parse_args(argv)
    command = documented_command(args.doc, args.name)
    if args.print:
        print(command)
        return 0
    docs = DocSet()
    (install,) = docs.command(args.doc, args.name).installs
    if args.top_hit is None and command != install.line:
        parser.error("--top-hit is required to run a command that does more than install")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="poolrag-first-hour-") as tmp:
        checkout = Path(tmp) / "poolrag"
        checkout.mkdir()
        _copy_checkout(checkout)
        # offline, with a cache of its own: what a new user on a machine without hub access gets
        env = os.environ | {
            "HF_HUB_OFFLINE": "1",
            "POOLRAG_CACHE_DIR": str(Path(tmp) / "cache"),
            "POOLRAG_MODEL_MAP": model_map(),
        }
        first = _run(command, checkout, env)
        if args.top_hit is not None:
            if _first_hit(first) != args.top_hit:
                sys.exit(f"top hit is {_first_hit(first)!r}, expected {args.top_hit!r}")
            again = _run(command, checkout, env)
            if (
                not re.search(r"\b0 embedded now\b|\bnothing embedded\b", again)
                or _first_hit(again) != args.top_hit
            ):
                sys.exit("re-running the command embedded again or changed the top hit")
            print(f"ok: {args.doc} command {args.name!r} ran twice offline; top hit {args.top_hit}")
        failed = 0
        if args.blocks:
            work = Path(tmp) / "blocks"
            work.mkdir()
            failed = run_blocks(docs, install, checkout, env, work)
    print(f"first hour of pip install {install.name}: {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
