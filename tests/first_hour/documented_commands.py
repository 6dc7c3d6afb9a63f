"""The shell commands the docs give users, read from the docs themselves so tests cannot drift.

A command is the one-line ``bash`` block right after an ``<!-- command: NAME -->`` marker.
Run as a script, it executes one such command in a fresh copy of the repository, twice, and checks
what a user would look at: the search's top hit, and that the second run embeds nothing::

    python tests/first_hour/documented_commands.py README.md main --top-hit sourdough.md
    python tests/first_hour/documented_commands.py --print README.md tests   # what .ci/run runs
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_MARKED = re.compile(r"<!-- command: (?P<name>[\w-]+) -->\s*```bash\n(?P<body>.*?)```", re.S)


def documented_command(doc: str, name: str) -> str:
    """The command marked ``name`` in ``doc`` (a path relative to the repository root)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    for match in _MARKED.finditer(text):
        if match["name"] == name:
            lines = [line for line in match["body"].splitlines() if line.strip()]
            if len(lines) != 1:
                raise ValueError(f"{doc}: command {name!r} must be one line, found {len(lines)}")
            return lines[0].strip()
    raise LookupError(f"{doc} has no '<!-- command: {name} -->' block")


def _copy_checkout(into: Path) -> None:
    """The files a fresh clone has: git's tracked files when git is there, else the tree minus caches."""
    try:
        files = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc")
    parser.add_argument("name")
    parser.add_argument("--print", action="store_true", help="only print the command")
    parser.add_argument("--top-hit", help="file name the search must rank first")
    args = parser.parse_args(argv)
    command = documented_command(args.doc, args.name)
    if args.print:
        print(command)
        return 0
    if args.top_hit is None:
        parser.error("--top-hit is required to run a command")
    with tempfile.TemporaryDirectory(prefix="poolrag-first-hour-") as tmp:
        checkout = Path(tmp) / "poolrag"
        checkout.mkdir()
        _copy_checkout(checkout)
        # offline, with a cache of its own: what a new user on a machine without hub access gets
        env = os.environ | {"HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(Path(tmp) / "cache")}
        first = _run(command, checkout, env)
        if _first_hit(first) != args.top_hit:
            sys.exit(f"top hit is {_first_hit(first)!r}, expected {args.top_hit!r}")
        again = _run(command, checkout, env)
        if not re.search(r"\b0 embedded now\b", again) or _first_hit(again) != args.top_hit:
            sys.exit("re-running the command embedded again or changed the top hit")
    print(f"ok: {args.doc} command {args.name!r} ran twice offline; top hit {args.top_hit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
