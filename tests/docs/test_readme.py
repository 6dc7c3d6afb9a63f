"""Every code block of README.md is run as written, or is proven to be what CI runs.

Each fenced block is claimed by one kind below, and each kind by a test that runs it:

* ``python``: executed here in order, in one namespace, offline (a hub id no package ships answered by
  the test-asset folder of the same model through ``$POOLRAG_MODEL_MAP``, as a user would set it);
* ``server``: bash with ``curl``, run here against a real ``poolrag serve`` on 127.0.0.1 (the port may
  be substituted);
* ``partner``: LangChain / LlamaIndex examples, identical to a runnable block of docs/integrations.md
  that the partner package's own tests run (the nox ``langchain`` / ``llamaindex`` sessions);
* ``ray``: run as written by tests/scaleout/test_readme_ray.py (the nox ``ray`` session);
* ``command``: the marked one-liners, which tests/first_hour/documented_commands.py and .ci/run
  execute (the nox ``first_hour`` session runs the main one twice, and installs the server's alone
  to run the blocks under it: tests/docs/test_doc_blocks.py);
* ``pip``: install lines, each equal to what one nox session installs, test tools aside;
* ``output``: a ``text`` block, what the block before it prints (checked where that block runs).

A block that fits none of them fails the accounting test: it cannot go into the README untested.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from models_doc import README_END, README_START, REGENERATE, with_readme_table
from nox_sessions import default_runs, default_sessions, sessions

from poolrag.config.model_map import ENV_VAR as MODEL_MAP
from poolrag.testing.doc_snippets import runnable_blocks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "first_hour"))
from doc_blocks import print_claims  # noqa: E402
from documented_commands import TEST_ASSET_MODELS, documented_command  # noqa: E402
from documented_output import json_documents, line_matches  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from nox_lanes import split  # noqa: E402

README = ROOT / "README.md"
INTEGRATIONS_MD = ROOT / "docs" / "integrations.md"
#: docs/integrations.md's runnable tags -> (the partner package whose tests run them, its nox session);
#: each LlamaIndex distribution tags its examples with its own name
PARTNER_TAGS = {"langchain": ("langchain-poolrag", "langchain")} | {
    folder.name: (folder.name, "llamaindex") for folder in (ROOT / "integrations").glob("llama-index-*")
}
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)
_COMMAND_MARK = re.compile(r"<!-- command: (?P<name>[\w-]+) -->\s*$")
TEST_TOOLS = re.compile(r"^pytest(?:-[\w-]+)?(?:[<>=!~].*)?$")


@pytest.fixture
def model_map(assets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$POOLRAG_MODEL_MAP`` naming the test-asset folders, as first_hour sets it: blocks run as written."""
    monkeypatch.setenv(
        MODEL_MAP, ",".join(f"{hub}={assets / folder}" for hub, folder in TEST_ASSET_MODELS.items())
    )


@dataclass(frozen=True)
class Block:
    index: int
    lang: str
    body: str
    command: str | None  # the name of a `<!-- command: NAME -->` mark right before it

    @property
    def kind(self) -> str | None:
        if self.command is not None:
            return "command"
        if self.lang == "text":  # what the block before prints, checked where that block runs
            return "output"
        lines = [line for line in self.body.splitlines() if line.strip() and not line.startswith("#")]
        if self.lang == "bash" and lines and all(line.startswith("pip install ") for line in lines):
            return "pip"
        if self.lang == "bash" and "--ray" in self.body:
            return "ray"
        if self.lang == "bash" and "curl " in self.body and "poolrag serve" in self.body:
            return "server"
        if self.lang == "python" and re.search(r"^from (langchain\w*|llama_index)\b", self.body, re.M):
            return "partner"
        if self.lang == "python":
            return "python"
        return None

    def __str__(self) -> str:
        return f"README block {self.index} ({self.lang}): {self.body.splitlines()[0]!r}"


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    blocks = []
    for index, match in enumerate(_FENCE.finditer(text)):
        mark = _COMMAND_MARK.search(text[: match.start()].rstrip("\n") + "\n")
        command = mark["name"] if mark and text[mark.end() : match.start()].strip() == "" else None
        blocks.append(Block(index, match["lang"], match["body"], command))
    return blocks


def of_kind(kind: str) -> list[Block]:
    return [block for block in readme_blocks() if block.kind == kind]


def test_every_block_is_accounted_for() -> None:
    blocks = readme_blocks()
    assert blocks, "README.md has no code blocks"
    unclaimed = [str(block) for block in blocks if block.kind is None]
    assert not unclaimed, "blocks no test runs:\n" + "\n".join(unclaimed)
    # the README teaches each of these; losing one would be a silent regression of the docs
    kinds = {block.kind for block in blocks} - {"output"}
    assert kinds == {"command", "pip", "python", "server", "partner", "ray"}


def test_registry_table_is_generated_from_the_registry() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count(README_START) == text.count(README_END) == 1
    assert text == with_readme_table(text), f"README.md's registry table is stale; run `{REGENERATE}`"


# --- python -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("model_map")
def test_python_blocks_run_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = of_kind("python")
    namespace: dict[str, object] = {"__name__": "__readme__"}
    claims: list[str] = []
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # MiniLM's hub id must resolve to the packaged copy
    for block in blocks:
        exec(compile(block.body, str(block), "exec"), namespace)
        claims += print_claims(block.body)
    printed = capsys.readouterr().out.splitlines()
    assert claims, "the python blocks claim no outputs in their comments"
    for claim in claims:
        assert any(line_matches(claim, line) for line in printed), (
            f"a README comment says {claim!r} is printed; printed: {printed}"
        )
    # the reranker block ranks the relevant passage first
    scores = [float(line.split()[0]) for line in printed if re.match(r"\d\.\d{3}  ", line)]
    assert len(scores) == 2 and scores[0] > 0.5 > scores[1], printed
    assert "cross-encoder/ms-marco-MiniLM-L-12-v2" in "".join(b.body for b in blocks)


# --- server -------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_bash_block(body: str, cwd: Path, timeout: float) -> tuple[int, str, str]:
    """``bash`` on the block in a process group of its own, which is ended afterwards (the server the
    block started in the background keeps running when bash exits). Returns (exit code, out, err)."""
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out, err = cwd / "block.out", cwd / "block.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            ["bash", "-c", body], cwd=cwd, env=env, stdout=stdout, stderr=stderr, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    return code, out.read_text(), err.read_text()


@pytest.mark.usefixtures("model_map")
def test_curl_block_runs_against_a_real_server(tmp_path: Path) -> None:
    (block,) = of_kind("server")
    port = _free_port()
    assert block.body.count("127.0.0.1:8000") >= 4 and "--port" not in block.body
    body = block.body.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    body = body.replace("poolrag serve ", f"poolrag serve --port {port} ", 1)
    code, out, err = run_bash_block(body, tmp_path, timeout=600)
    assert code == 0, err[-3000:]
    health, embeddings, rerank, score = json_documents(out)
    assert health == {"status": "ok"}
    assert embeddings["model"] == "minilm" and len(embeddings["data"][0]["embedding"]) == 384
    assert [r["index"] for r in rerank["results"]] == [0]
    assert rerank["model"] == "reranker"  # the second model of the same process
    paris, bananas = (item["score"] for item in score["data"])
    assert paris > bananas


# --- blocks other sessions run ---------------------------------------------------------------------


def test_partner_blocks_are_the_examples_the_partner_packages_run() -> None:
    recorded = sessions()
    for block in of_kind("partner"):
        tags = [tag for tag in PARTNER_TAGS if block.body in runnable_blocks(INTEGRATIONS_MD, tag)]
        assert tags, f"{block} is not a `<!-- runnable: TAG -->` block of docs/integrations.md"
        for tag in tags:
            package, session = PARTNER_TAGS[tag]
            runner = next((ROOT / "integrations" / package / "tests").rglob("test_docs.py"))
            assert f'runnable_blocks(INTEGRATIONS_MD, "{tag}")' in runner.read_text(encoding="utf-8")
            assert (".", "pytest", f"integrations/{package}") in recorded[session].runs


def test_ray_block_is_run_by_the_ray_session() -> None:
    (block,) = of_kind("ray")
    runner = ROOT / "tests" / "scaleout" / "test_readme_ray.py"
    assert "README.md" in runner.read_text(encoding="utf-8")
    assert any(run[1:3] == ("pytest", "tests/scaleout") for run in sessions()["ray"].runs)
    assert "poolrag ingest" in block.body and "poolrag serve" in block.body


def test_marked_commands_are_what_first_hour_and_ci_run() -> None:
    commands = {block.command: block.body.strip() for block in of_kind("command")}
    assert set(commands) == {"main", "tests", "server"}
    for name, body in commands.items():
        assert documented_command("README.md", name) == body
    script = "tests/first_hour/documented_commands.py"
    first_hour = [run for name, s in sessions().items() if name.startswith("first_hour") for run in s.runs]
    for name in ("main", "server"):  # each in a fresh virtualenv, with the blocks under its install
        (run,) = [run for run in first_hour if run[2:5] == (script, "README.md", name)]
        assert run[:2] == (".", "python") and "--blocks" in run
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "documented_commands.py --print README.md tests" in ci and 'bash -c "$command"' in ci
    # the lanes run every default session once, tests before first_hour; they cover the README
    assert commands["tests"].endswith("&& python scripts/nox_lanes.py")
    assert {"first_hour", "tests", "ray", "langchain", "llamaindex"} <= set(default_sessions())
    assert default_sessions().index("tests") < default_sessions().index("first_hour")  # a bare nox too
    first, second = split(default_runs())
    assert sorted(first + second) == sorted(default_runs())
    assert first[0] == "tests" and all(run.startswith("first_hour(") for run in first[1:])
    assert second[-1].startswith("first_hour(")  # long after tests built the test assets
    assert "--ignore=tests/docs" not in sessions()["tests"].runs[-1]  # this file runs in the tests session


def _install_set(args: list[str] | tuple[str, ...]) -> tuple[frozenset, ...]:
    """(constraints, editables with their extras, requirements), test tools and test extras aside."""
    constraints, editables, requirements = set(), set(), set()
    it = iter(args)
    for arg in it:
        if arg == "-c":
            constraints.add(next(it))
        elif arg == "-e":
            target, _, extras = next(it).removeprefix("./").partition("[")
            kept = frozenset(e for e in extras.rstrip("]").split(",") if e and e != "test")
            editables.add((target, kept))
        elif not TEST_TOOLS.match(arg):
            requirements.add(arg)
    return frozenset(constraints), frozenset(editables), frozenset(requirements)


def test_pip_lines_are_what_a_nox_session_installs() -> None:
    installed = {
        name: _install_set([a for call in session.installs for a in call if call[:1] != ("--upgrade",)])
        for name, session in sessions().items()
    }
    blocks = of_kind("pip")
    assert blocks
    for block in blocks:
        for line in block.body.strip().splitlines():
            wanted = _install_set(shlex.split(line.split("#")[0])[2:])
            matches = [name for name, got in installed.items() if got == wanted]
            assert matches, f"{line!r} installs what no nox session installs: {installed}"


def test_relative_links_point_at_files() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://|#)([^)#\s]+)", text)
    assert targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"README links to missing files: {missing}"
