"""Every shell and Python block of README.md and docs/*.md is run by some nox session, or says why not.

The ``first_hour`` session runs, in a fresh virtualenv per documented install, every block under that
install (tests/first_hour/documented_commands.py ``--blocks``; which install a block runs under is
tests/first_hour/doc_blocks.py's rule). Blocks under the other installs are the partner packages'
``runnable:`` examples, README copies of them, or install lines a session makes; anything else must
carry ``<!-- not-run: why -->``. This file only reads the docs and the noxfile: it is cheap, and it
fails when a new block would go unrun.
"""

from __future__ import annotations

import re
import shlex
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from nox_sessions import sessions

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "first_hour"))
from doc_blocks import Block, DocSet, Install, documented_outputs, print_claims, shell_items  # noqa: E402
from documented_commands import TEST_ASSET_MODELS  # noqa: E402
from documented_output import line_matches, mismatches, parse_documented  # noqa: E402

SCRIPT = "tests/first_hour/documented_commands.py"
TEST_TOOLS = re.compile(r"^pytest(?:-[\w-]+)?(?:[<>=!~].*)?$")


@pytest.fixture(scope="module")
def docs() -> DocSet:
    return DocSet()


def first_hour_runs() -> list[tuple[str, ...]]:
    """(doc, name, flags...) of each first_hour session's documented command."""
    return [
        run[3:]
        for name, session in sessions().items()
        if name.startswith("first_hour")
        for run in session.runs
        if run[1:3] == ("python", SCRIPT)
    ]


def installs_run_with_blocks(docs: DocSet) -> dict[tuple[object, ...], str]:
    """The installs whose blocks first_hour runs -> the session argument that runs them."""
    found = {}
    for doc, name, *flags in first_hour_runs():
        if "--blocks" in flags:
            (install,) = docs.command(doc, name).installs
            found[install.key] = f"{doc} {name}"
    return found


def _runner_of_tag(tag: str) -> bool:
    """Some test reads ``<!-- runnable: TAG -->`` blocks (poolrag's own tests or a partner package's)."""
    call = f'"{tag}")'
    return any(
        "runnable_blocks(" in text and call in text
        for path in [*(ROOT / "tests").rglob("test_*.py"), *(ROOT / "integrations").rglob("test_*.py")]
        for text in [path.read_text(encoding="utf-8")]
    )


def _nox_install_keys() -> list[tuple[object, ...]]:
    """What each nox session asks pip for, test tools and test extras aside."""
    keys = []
    for session in sessions().values():
        args = [a for call in session.installs for a in call if call[:1] != ("--upgrade",)]
        kept = [_without_test_extra(a) for a in args if not TEST_TOOLS.match(a)]
        install = Install.parse("pip install " + " ".join(shlex.quote(a) for a in kept))
        assert install is not None
        keys.append(install.key)
    return keys


def _without_test_extra(arg: str) -> str:
    def drop(match: re.Match[str]) -> str:
        extras = [e for e in match[1].split(",") if e != "test"]
        return f"[{','.join(extras)}]" if extras else ""

    return re.sub(r"\[([^\]]*)\]$", drop, arg)


def where_it_runs(block: Block, docs: DocSet) -> str | None:
    """The session or test that runs ``block``, the reason it is not run, or None."""
    if "not-run" in block.marks:
        return f"not run: {block.marks['not-run']}"
    if "command" in block.marks:
        runs = {(doc, name) for doc, name, *_ in first_hour_runs()}
        return "first_hour" if (block.doc, block.marks["command"]) in runs else None
    if docs.install_of[block].key in installs_run_with_blocks(docs):
        return "first_hour --blocks"
    if "runnable" in block.marks:
        return f"runnable: {block.marks['runnable']}" if _runner_of_tag(block.marks["runnable"]) else None
    if block.runs_as == "python":  # a copy of a partner example (tests/docs/test_readme.py checks which)
        tagged = [b for b in docs.blocks if "runnable" in b.marks and b.body == block.body]
        return f"the partner example at {tagged[0]}" if tagged else None
    commands = [item.text for item in shell_items(block.body) if item.is_command]
    installs = [Install.parse(command) for command in commands]
    if commands and all(install is not None for install in installs):
        made = _nox_install_keys()
        return "a nox session's install" if all(i.key in made for i in installs if i) else None
    return None


def test_every_block_runs_somewhere_or_says_why_not(docs: DocSet) -> None:
    unrun = [str(block) for block in docs.blocks if block.runs_as and where_it_runs(block, docs) is None]
    assert not unrun, "blocks no session runs (run them, or mark <!-- not-run: why -->):\n" + "\n".join(unrun)


def test_first_hour_makes_one_environment_per_documented_install(docs: DocSet) -> None:
    runs = first_hour_runs()
    keys = [docs.command(doc, name).installs[0].key for doc, name, *_ in runs]
    assert len(keys) == len(set(keys)), "two first_hour sessions install the same extras"
    run_blocks = installs_run_with_blocks(docs)
    # the two front doors the README starts users on, each in its own virtualenv
    readme = DocSet(["README.md"])
    assert readme.command("README.md", "main").installs[0].key in run_blocks
    assert readme.command("README.md", "server").installs[0].key in run_blocks
    server = Install.parse('pip install -c constraints-cpu.txt -e ".[server,default-model]"')
    assert server is not None and server.key in run_blocks


def test_not_run_marks_say_why_and_sit_on_blocks_a_user_runs(docs: DocSet) -> None:
    for block in docs.blocks:
        if "not-run" in block.marks:
            assert block.runs_as, f"{block}: only shell and Python blocks are run"
            assert len(block.marks["not-run"].split()) >= 3, f"{block}: say why it is not run"


def test_the_model_map_names_the_folder_built_from_that_very_model() -> None:
    from poolrag_test_assets.registry import ASSETS_BY_FOLDER

    for hub_id, folder in TEST_ASSET_MODELS.items():
        assert ASSETS_BY_FOLDER[folder].source.upstream == hub_id


def test_the_blocks_first_hour_runs_name_only_models_it_can_answer(docs: DocSet) -> None:
    """A hub id outside the packaged MiniLM and the test-asset map would fail offline: mark it."""
    known = {"sentence-transformers/all-MiniLM-L6-v2", *TEST_ASSET_MODELS}
    hub_id = re.compile(r"[\"' ](?P<id>[\w.-]+/[\w.-]+-[\w.-]*)[\"' \n]")
    for block in docs.blocks:
        if where_it_runs(block, docs) == "first_hour --blocks":
            named = {
                m["id"] for m in hub_id.finditer(block.body) if not m["id"].startswith(("path/", "docs/"))
            }
            assert named <= known, f"{block} names {named - known}"


# --- what blocks say they print -------------------------------------------------------------------


def test_print_comments_that_are_values_are_claims_and_prose_is_not() -> None:
    code = (
        "print(engine.supported_tasks)   # ('embed', 'score')\n"
        "print(tokens.shape)             # (4, 384): [CLS] a cat [SEP]\n"
        "print(report)                   # FastModeReport(mode='int8', min_cosine=0.9996..., active=True)\n"
        "print(f'{s:.3f}  {p}')          # sigmoid relevance; 1:1, 1:N, N:N\n"
        "print(steps)                    # [[p(+), p(-)], ...] one row per step\n"
    )
    assert print_claims(code) == [
        "('embed', 'score')",
        "(4, 384)",
        "FastModeReport(mode='int8', min_cosine=0.9996..., active=True)",
    ]


def test_a_printed_line_matches_its_claim_to_the_written_precision() -> None:
    assert line_matches("(3, 384)", "(3, 384)")
    assert not line_matches("(3, 384)", "(3, 768)")
    assert line_matches(
        "FastModeReport(mode='int8', min_cosine=0.9996..., ...)",
        "FastModeReport(mode='int8', min_cosine=0.99963, active=True)",
    )
    assert not line_matches("FastModeReport(mode='int8', ...)", "FastModeReport(mode='bf16', active=True)")
    assert line_matches("1.000  Paris", "1.000  Paris") and not line_matches("0.114  Berlin", "0.031  Berlin")


def test_documented_json_is_compared_key_by_key_with_ellipses_and_rounding() -> None:
    documented = (
        '{"id": "embd-…", "created": 1795341326, "model": "m",\n'
        ' "data": [{"index": 0, "embedding": [0.1302, -0.0157, …]}, …],   # one row per text\n'
        ' "usage": {"prompt_tokens": 16}}'
    )
    answer = (
        '{"id": "embd-9f", "created": 1, "model": "m", "object": "list",'
        ' "data": [{"index": 0, "embedding": [0.13021, -0.01574, 0.5]}, {"index": 1, "embedding": []}],'
        ' "usage": {"prompt_tokens": 16, "total_tokens": 16}}'
    )
    assert mismatches(documented, "INFO: a log line\n" + answer) == []
    assert mismatches(documented, answer.replace("0.13021", "0.1402")) == [
        "data[0].embedding[0] is 0.1402, documented 0.1302"
    ]
    assert mismatches(documented, answer.replace('"embd-9f"', '"score-1"'))
    assert mismatches(documented, answer.replace('"prompt_tokens": 16', '"prompt_tokens": 17'))
    status, _ = parse_documented('HTTP/1.1 404 Not Found\n{"error": {"code": "model_not_found"}}')
    assert status == "HTTP/1.1 404 Not Found"
    assert mismatches(
        'HTTP/1.1 404 Not Found\n{"error": {"code": "x"}}', 'HTTP/1.1 200 OK\n{"error": {"code": "x"}}'
    )
    assert parse_documented('"results": [{"index": 1, "score": 0.5, …}]')[1] == {
        "results": [{"index": 1, "score": Decimal("0.5")}]
    }


def test_every_documented_output_of_a_block_first_hour_runs_can_be_read(docs: DocSet) -> None:
    outputs = 0
    for block in docs.blocks:
        if block.runs_as == "shell" and where_it_runs(block, docs) == "first_hour --blocks":
            for text in documented_outputs(block.body).values():
                parse_documented(text)
                outputs += 1
    assert outputs >= 8  # docs/server.md's answers
