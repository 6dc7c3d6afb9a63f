"""The code blocks of README.md and docs/*.md, read as a user reads them: which install each one runs
under, what it is marked with, and what it says it prints.

Standard library only: the ``first_hour`` session runs this before anything is installed.

* **Marks** are HTML comments on the lines right above a fence: ``<!-- not-run: REASON -->`` (the
  block cannot run here: a GPU, a model no test folder stands for, a placeholder path; the reason
  says which), ``<!-- command: NAME -->`` (a one-line command the ``first_hour`` session runs as
  written), ``<!-- runnable: TAG -->`` (run by the tests that read that tag).
* **The install a block runs under** is the last ``pip install`` of the checkout (``-e ".[...]"``)
  above it on its page, its own included; before any, README's first command. A ``command:``
  one-liner that goes on after its install (``pip install ... && poolrag ...``) is self-contained:
  its install reaches no further.
* **What a block says it prints**: a ``print(...)  # CLAIM`` comment in Python (``# (3, 384)``:
  the text before a ``: `` explanation, not prose), the comment lines that follow a shell command
  when they start like output (``# {"id": ...``, ``# HTTP/1.1 404``), or a ``text`` block right after
  the code block when the sentence between says it prints.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"bash", "sh", "shell", "console"})
PYTHON = frozenset({"python", "py"})

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)
_MARK = re.compile(r"<!--\s*(?P<name>[\w-]+):\s*(?P<value>.*?)\s*-->")
_OUTPUT_START = re.compile(r'^(?:[{\["]|HTTP/\d)')
_SAYS_IT_PRINTS = re.compile(r"\bprint(?:s|ed)?\b")


def documents() -> list[str]:
    """The pages a user reads, in reading order: README.md, then docs/*.md by name."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Install:
    """One ``pip install`` line: what it puts into an environment, comparable across pages."""

    line: str
    constraints: tuple[str, ...]
    editables: tuple[tuple[str, tuple[str, ...]], ...]  # (target, sorted extras)
    requirements: tuple[str, ...]

    @classmethod
    def parse(cls, line: str) -> Install | None:
        """The install ``line`` asks for, or None when it is no ``pip install`` line."""
        words = shlex.split(line.split(" && ")[0].split(" #")[0])
        if words[:2] != ["pip", "install"]:
            return None
        constraints, editables, requirements = [], [], []
        args = iter(words[2:])
        for arg in args:
            if arg == "-c":
                constraints.append(next(args))
            elif arg == "-e":
                target, _, extras = next(args).partition("[")
                target = target.rstrip("/").removeprefix("./") or "."
                editables.append((target, tuple(sorted(e for e in extras.rstrip("]").split(",") if e))))
            else:
                requirements.append(arg)
        return cls(
            line.split(" && ")[0].strip(), tuple(constraints), tuple(sorted(editables)), tuple(requirements)
        )

    @property
    def of_the_checkout(self) -> bool:
        return any(target == "." for target, _ in self.editables)

    @property
    def key(self) -> tuple[object, ...]:
        return (frozenset(self.constraints), self.editables, frozenset(self.requirements))

    @property
    def name(self) -> str:
        """``.[default-model,server]`` (and any other packages), for reports."""
        parts = [f"{target}[{','.join(extras)}]" if extras else target for target, extras in self.editables]
        return " ".join(parts + list(self.requirements))


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, what it holds, how it is marked."""

    doc: str
    index: int  # among the page's fences
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    marks: dict[str, str] = field(hash=False, compare=False)
    prose_before: str = field(hash=False, compare=False)  # text between the previous fence and this one

    def __str__(self) -> str:
        first = next((line for line in self.body.splitlines() if line.strip()), "")
        return f"{self.doc}:{self.line} ({self.lang or 'no language'}) {first.strip()[:70]!r}"

    @property
    def runs_as(self) -> str | None:
        """``shell`` or ``python`` for blocks a user runs; None for output, config and diagrams."""
        return "shell" if self.lang in SHELL else "python" if self.lang in PYTHON else None

    @property
    def installs(self) -> list[Install]:
        if self.runs_as != "shell":
            return []
        found = (Install.parse(command.text) for command in shell_items(self.body) if command.is_command)
        return [install for install in found if install is not None and install.of_the_checkout]

    @property
    def self_contained(self) -> bool:
        """A ``command:`` one-liner that does more than install: its install is its own."""
        return "command" in self.marks and " && " in self.body


def read_blocks(doc: str) -> list[Block]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    blocks, previous_end = [], 0
    for index, match in enumerate(_FENCE.finditer(text)):
        before = text[previous_end : match.start()]
        marks: dict[str, str] = {}
        lines = before.rstrip("\n").split("\n")
        while lines and (not lines[-1].strip() or _MARK.fullmatch(lines[-1].strip())):
            mark = _MARK.fullmatch(lines.pop().strip())
            if mark:
                marks.setdefault(mark["name"], mark["value"])
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(doc, index, line, match["lang"], match["body"], marks, "\n".join(lines)))
        previous_end = match.end()
    return blocks


class DocSet:
    """Every block of every page, each with the install it runs under."""

    def __init__(self, docs: list[str] | None = None) -> None:
        self.docs = docs if docs is not None else documents()
        self.pages = {doc: read_blocks(doc) for doc in self.docs}

    @cached_property
    def blocks(self) -> list[Block]:
        return [block for doc in self.docs for block in self.pages[doc]]

    @cached_property
    def default_install(self) -> Install:
        """README's first install: what a user who follows the README has."""
        return next(i for block in self.pages["README.md"] for i in block.installs)

    @cached_property
    def install_of(self) -> dict[Block, Install]:
        chosen: dict[Block, Install] = {}
        for doc in self.docs:
            current = self.default_install
            for block in self.pages[doc]:
                own = block.installs
                chosen[block] = own[-1] if own else current
                if own and not block.self_contained:
                    current = own[-1]
        return chosen

    def under(self, install: Install) -> list[Block]:
        """The blocks that run under ``install``, in reading order."""
        return [block for block in self.blocks if self.install_of[block].key == install.key]

    def command(self, doc: str, name: str) -> Block:
        for block in self.pages[doc]:
            if block.marks.get("command") == name:
                return block
        raise LookupError(f"{doc} has no '<!-- command: {name} -->' block")

    def printed_output_block(self, block: Block) -> Block | None:
        """The ``text`` block after ``block`` that the sentence between says it prints, if any."""
        page = self.pages[block.doc]
        following = page[block.index + 1] if block.index + 1 < len(page) else None
        if following is None or following.lang != "text":
            return None
        sentence = following.prose_before.strip().split("\n\n")[-1]  # the paragraph right above it
        return following if _SAYS_IT_PRINTS.search(sentence) else None


# --- shell: commands and the output documented under them -----------------------------------------


@dataclass(frozen=True)
class ShellItem:
    """A logical line of a shell block: a command (continuations and quoted newlines joined) with
    its trailing comment, or a comment line."""

    text: str  # the command as written, or a comment's text without its '#'
    comment: str  # a command's trailing comment ('' if none)
    is_command: bool


def shell_items(body: str) -> list[ShellItem]:
    """``body`` split where bash would end a command: at a newline outside quotes and not escaped."""
    items: list[ShellItem] = []
    current, comment, quote, escaped, in_comment = [], [], "", False, False
    for char in body + "\n":
        if in_comment:
            if char == "\n":
                in_comment = False
            else:
                comment.append(char)
                continue
        if escaped:
            current.append(char)
            escaped = False
            continue
        if char == "\\" and quote != "'":
            current.append(char)
            escaped = True
            continue
        if quote:
            quote = "" if char == quote else quote
            current.append(char)
            continue
        if char in "'\"":
            quote = char
        elif char == "#" and (not current or current[-1] in " \t\n"):
            in_comment = True
            continue
        if char == "\n":
            command, note = "".join(current).strip(), "".join(comment).strip()
            if command:
                items.append(ShellItem(command, note, True))
            elif note or comment:
                items.append(ShellItem("".join(comment).removeprefix(" ").rstrip(), "", False))
            current, comment = [], []
            continue
        current.append(char)
    return items


def documented_outputs(body: str) -> dict[int, str]:
    """Command number (among the block's commands) -> the output the block documents for it: a
    trailing comment or the comment lines after it, when they start as output does."""
    outputs: dict[int, str] = {}
    number, items = -1, shell_items(body)
    at = 0
    while at < len(items):
        item = items[at]
        if item.is_command:
            number += 1
            if _OUTPUT_START.match(item.comment):
                outputs[number] = item.comment
            at += 1
            continue
        if number >= 0 and number not in outputs and _OUTPUT_START.match(item.text.strip()):
            lines = []
            while at < len(items) and not items[at].is_command:
                lines.append(items[at].text)
                at += 1
            outputs[number] = "\n".join(lines)
            continue
        at += 1
    return outputs


# --- python: the values a comment says a print shows ---------------------------------------------


def print_claims(code: str) -> list[str]:
    """``print(x)  # (3, 384): why`` claims ``(3, 384)``; a comment that is prose (a space outside
    brackets and quotes, such as ``# sigmoid relevance; 1:1``) claims nothing."""
    claims = []
    for line in code.splitlines():
        match = re.match(r"\s*print\(.*\)\s+#\s*(?P<comment>.+)$", line)
        if match is None:
            continue
        claim = match["comment"].split(": ")[0].strip()
        if claim and not _has_space_outside_brackets(claim):
            claims.append(claim)
    return claims


def _has_space_outside_brackets(text: str) -> bool:
    depth, quote = 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == " " and depth == 0:
            return True
    return False
