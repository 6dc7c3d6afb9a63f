#!/usr/bin/env python3
"""Real question/answer sets, written by people, in BEIR layout: what retrieval defaults are chosen on.

    python benchmarks/real_datasets.py [--dest DIR] [--sets debian-faq-en,perlfaq,...]

Each set becomes ``DEST/NAME/{corpus.jsonl, queries.jsonl, qrels/test.tsv, SOURCE.json}``; the
default ``DEST`` is ``~/.cache/poolrag/real-data``, outside the repository on purpose: the text is
never committed, only this script that makes it. ``SOURCE.json`` names the package, its version
and its licence.

- ``debian-faq-en`` / ``-de`` / ``-fr``: the Debian FAQ (Debian packages ``debian-faq``,
  ``debian-faq-de``, ``debian-faq-fr``; DocBook HTML). Every ``h2``/``h3``/``h4`` section is a
  passage (its text up to the next title, without the title); a title ending in ``?`` is a query
  whose one relevant passage is its own section. The three are translations of one text.
- ``perlfaq``: perlfaq1-9 from the Debian package ``perl-doc`` (POD). Each ``=head2`` is a query,
  the text after it up to the next heading its answer.
- ``chatterbot-<language>``: the ``chatterbot-corpus`` wheel from PyPI (YAML conversations). Each
  distinct reply is a passage, each distinct prompt a query judged by all its replies. Short
  chit-chat: a smoke test across languages, too weak to choose a default on.

Debian packages come with ``apt-get download`` (an ``apt-get update`` first, once) and are unpacked
with ``dpkg-deb -x``; the wheel comes with ``pip download --no-deps`` and is read as a zip file.
Nothing is installed. So the Debian sets need apt-get (Debian or Ubuntu), root for ``apt-get update``
and network access to a Debian mirror; the wheel needs network access to PyPI. When a step cannot
run, the script exits with status 1 and one line on stderr: the step, the tool's own reason and what
the set needs. The parsers are plain functions of the text (tests/evaluation/
test_real_datasets.py runs them on tiny inline samples), HTML through the standard library's
``html.parser``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

DEFAULT_DEST = Path.home() / ".cache" / "poolrag" / "real-data"
DEBIAN_FAQ = {
    "debian-faq-en": "debian-faq",
    "debian-faq-de": "debian-faq-de",
    "debian-faq-fr": "debian-faq-fr",
}
DEBIAN_FAQ_LICENCE = (
    "Debian FAQ licence (verbatim and modified copies permitted with the notice; see "
    "usr/share/doc/debian-faq/copyright in the package), Copyright (C) 1996-2003 "
    "Software in the Public Interest"
)
PERLFAQ_LICENCE = "same terms as Perl itself (Artistic License 1.0 or GPL-1.0-or-later)"
CHATTERBOT_LICENCE = "BSD-3-Clause"
CHATTERBOT_VERSION = "1.3.3"
ALL_SETS = (*DEBIAN_FAQ, "perlfaq", "chatterbot-english")


@dataclass(frozen=True)
class QAPair:
    """One question and the passage that answers it (``question`` empty: a passage no query asks for)."""

    question: str
    answer: str


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# ---------------------------------------------------------------------------------------------- HTML


class _DocBookSections(HTMLParser):
    """Collects (title, text) for every h2/h3/h4 section, skipping the navigation bars."""

    TITLES = frozenset({"h1", "h2", "h3", "h4"})
    SKIPPED = frozenset({"script", "style", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[str, list[str]]] = []
        self._title: list[str] | None = None
        self._title_tag = ""
        self._skip_depth = 0  # inside a navigation <div> (counting the divs nested in it)
        self._skipped_tag = 0  # inside <script>/<style>/<head>
        self._current: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div":
            classes = (dict(attrs).get("class") or "").split()
            if self._skip_depth or {"navheader", "navfooter"} & set(classes):
                self._skip_depth += 1
            return
        if tag in self.SKIPPED:
            self._skipped_tag += 1
        elif tag in self.TITLES and not self._skip_depth:
            self._title, self._title_tag = [], tag

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._skip_depth:
            self._skip_depth -= 1
        elif tag in self.SKIPPED and self._skipped_tag:
            self._skipped_tag -= 1
        elif tag == self._title_tag and self._title is not None:
            title = _squash("".join(self._title))
            self._title = None
            # A chapter title (h1) ends the section before it but opens no passage of its own.
            self._current = [] if tag != "h1" else None
            if self._current is not None:
                self.sections.append((title, self._current))

    def handle_data(self, data: str) -> None:
        if self._skip_depth or self._skipped_tag:
            return
        if self._title is not None:
            self._title.append(data)
        elif self._current is not None:
            self._current.append(data)


_SECTION_NUMBER = re.compile(r"^\d+(\.\d+)*\.?\s+")


def docbook_pairs(html: str) -> list[QAPair]:
    """The sections of one DocBook HTML page: a title ending in '?' is a question, its section text the
    answer; other sections are passages without a question."""
    parser = _DocBookSections()
    parser.feed(html)
    parser.close()
    pairs = []
    for title, parts in parser.sections:
        answer = _squash(" ".join(parts))
        if not answer:
            continue
        title = _SECTION_NUMBER.sub("", title)
        pairs.append(QAPair(title if title.rstrip().endswith("?") else "", answer))
    return pairs


# ----------------------------------------------------------------------------------------------- POD

_POD_CODE = re.compile(r"[A-Z]<(?:<+\s+(.*?)\s+>+|([^<>]*))>", re.DOTALL)
_POD_ESCAPES = {"gt": ">", "lt": "<", "verbar": "|", "sol": "/"}


def _pod_text(text: str) -> str:
    """Formatting codes reduced to their text: ``C<x>`` → ``x``, ``L<text|target>`` → ``text``."""

    def plain(match: re.Match[str]) -> str:
        code = match.group(0)[0]
        inner = match.group(1) if match.group(1) is not None else match.group(2)
        if code == "E":
            return _POD_ESCAPES.get(inner, "")
        if code == "L":
            inner = inner.split("|", 1)[0]
        if code in "XZ":
            return ""
        return inner

    previous = None
    while previous != text:  # nested codes (B<C<x>>) come apart from the inside out
        previous, text = text, _POD_CODE.sub(plain, text)
    return text


def pod_pairs(pod: str) -> list[QAPair]:
    """Each ``=head2`` a question, the text after it (up to the next heading) its answer."""
    pairs = []
    question: str | None = None
    body: list[str] = []

    def close() -> None:
        answer = _squash(_pod_text("\n".join(body)))
        if question and answer:
            pairs.append(QAPair(_squash(_pod_text(question)), answer))

    for line in pod.splitlines():
        if line.startswith("=head"):
            close()
            question, body = (line[len("=head2") :].strip() if line.startswith("=head2") else None), []
        elif line.startswith("="):
            command, _, rest = line.partition(" ")
            if command in ("=item",) and rest.strip() not in ("*", ""):
                body.append(rest)
        elif question is not None:
            body.append(line)
    close()
    return pairs


# ---------------------------------------------------------------------------------------------- YAML


def chatterbot_pairs(yaml_text: str) -> list[QAPair]:
    """Every (prompt, reply) of one chatterbot-corpus file: the first line of a conversation, and each
    line that follows it."""
    import yaml

    data = yaml.safe_load(yaml_text) or {}
    pairs = []
    for conversation in data.get("conversations") or []:
        if not isinstance(conversation, list) or len(conversation) < 2:
            continue
        lines = [_squash(str(line)) for line in conversation]
        pairs.extend(QAPair(lines[0], reply) for reply in lines[1:] if lines[0] and reply)
    return pairs


# -------------------------------------------------------------------------------------------- layout


def write_beir(pairs: Iterable[QAPair], folder: Path, source: dict[str, object]) -> dict[str, int]:
    """Pairs as BEIR files: each distinct answer one passage, each distinct question one query judged by
    every passage that answers it. Returns the counts."""
    passages: dict[str, str] = {}
    questions: dict[str, str] = {}
    relevant: dict[str, list[str]] = {}
    for pair in pairs:
        doc_id = passages.setdefault(pair.answer, f"d{len(passages)}")
        if pair.question:
            query_id = questions.setdefault(pair.question, f"q{len(questions)}")
            if doc_id not in relevant.setdefault(query_id, []):
                relevant[query_id].append(doc_id)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for text, doc_id in passages.items():
            out.write(json.dumps({"_id": doc_id, "title": "", "text": text}, ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for text, query_id in questions.items():
            out.write(json.dumps({"_id": query_id, "text": text}, ensure_ascii=False) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, doc_ids in relevant.items():
            out.writelines(f"{query_id}\t{doc_id}\t1\n" for doc_id in doc_ids)
    counts = {"passages": len(passages), "queries": len(questions)}
    (folder / "SOURCE.json").write_text(json.dumps({**source, **counts}, indent=2) + "\n", encoding="utf-8")
    return counts


# ---------------------------------------------------------------------------------------- downloading

APT_NEEDS = "the Debian sets need apt-get (Debian or Ubuntu), run as root, with network to the Debian mirror"
PYPI_NEEDS = "the chatterbot sets need pip with network access to PyPI"


class FetchFailed(Exception):
    """A download or unpacking step failed; the message is one line: the step and the tool's reason."""


def _reason(stderr: str, returncode: int) -> str:
    """The line of a tool's stderr that says why it failed: its first error line (apt's ``E:``, pip's
    ``ERROR:``), else its last line, else the exit status."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("E:", "ERROR:", "error:"))]
    return errors[0] if errors else lines[-1] if lines else f"exit status {returncode}"


def _run(
    command: Sequence[str], *, shown: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command``, its output captured; raise :class:`FetchFailed` with one line when it cannot
    start or exits non-zero (``shown``: the command as the message names it)."""
    shown = shown or " ".join(command)
    try:
        done = subprocess.run(list(command), cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise FetchFailed(f"`{shown}` could not start: no {command[0]} on this machine") from None
    if done.returncode != 0:
        raise FetchFailed(f"`{shown}` failed: {_reason(done.stderr, done.returncode)}")
    return done


def _debian_package(name: str, work: Path) -> tuple[Path, str]:
    """``apt-get download`` NAME into ``work`` and unpack it; returns the unpacked root and version."""
    _run(["apt-get", "download", name], cwd=work)
    deb = next(work.glob(f"{name}_*.deb"))
    root = work / name
    _run(["dpkg-deb", "-x", str(deb), str(root)], shown=f"dpkg-deb -x {deb.name}")
    version = _run(
        ["dpkg-deb", "-f", str(deb), "Version"], shown=f"dpkg-deb -f {deb.name} Version"
    ).stdout.strip()
    return root, version


def debian_faq(name: str, package: str, dest: Path, work: Path) -> dict[str, int]:
    root, version = _debian_package(package, work)
    language = name.rsplit("-", 1)[1]
    pages = sorted((root / "usr/share/doc/debian/FAQ").rglob(f"*.{language}.html"))
    pages = [p for p in pages if p.name != f"index.{language}.html"]
    if not pages:
        raise SystemExit(f"{package} {version}: no *.{language}.html pages under usr/share/doc/debian/FAQ")
    pairs = [pair for page in pages for pair in docbook_pairs(page.read_text(encoding="utf-8"))]
    source = {"package": f"debian:{package}", "version": version, "licence": DEBIAN_FAQ_LICENCE}
    return write_beir(pairs, dest / name, {**source, "files": [p.name for p in pages]})


def perlfaq(dest: Path, work: Path) -> dict[str, int]:
    root, version = _debian_package("perl-doc", work)
    pods = sorted(root.glob("usr/share/perl/5.*/pod/perlfaq[1-9].pod"))
    if not pods:
        raise SystemExit(f"perl-doc {version}: no usr/share/perl/5.*/pod/perlfaq[1-9].pod")
    pairs = [pair for pod in pods for pair in pod_pairs(pod.read_text(encoding="utf-8"))]
    source = {"package": "debian:perl-doc", "version": version, "licence": PERLFAQ_LICENCE}
    return write_beir(pairs, dest / "perlfaq", {**source, "files": [p.name for p in pods]})


def chatterbot(language: str, dest: Path, work: Path) -> dict[str, int]:
    spec = f"chatterbot-corpus=={CHATTERBOT_VERSION}"
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        spec,
        "-d",
        str(work),
    ]
    _run(command, shown=f"pip download --no-deps {spec}")
    wheel = next(work.glob("chatterbot_corpus-*.whl"))
    prefix = f"chatterbot_corpus/data/{language}/"
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(n for n in archive.namelist() if n.startswith(prefix) and n.endswith(".yml"))
        if not names:
            raise SystemExit(f"{wheel.name}: no language {language!r} under chatterbot_corpus/data/")
        pairs = [pair for n in names for pair in chatterbot_pairs(archive.read(n).decode("utf-8"))]
    source = {"package": f"pypi:{spec}", "version": CHATTERBOT_VERSION, "licence": CHATTERBOT_LICENCE}
    return write_beir(pairs, dest / f"chatterbot-{language}", {**source, "files": names})


def build(names: Sequence[str], dest: Path) -> None:
    """Write each set in ``names`` under ``dest``. A step that cannot run ends the script with one line
    (status 1): the set, the step, the tool's own reason and what the set needs."""
    unknown = [n for n in names if n not in DEBIAN_FAQ and n != "perlfaq" and not n.startswith("chatterbot-")]
    if unknown:
        raise SystemExit(
            f"unknown set {unknown[0]!r}; choose from {', '.join(ALL_SETS)} or chatterbot-LANGUAGE"
        )
    debian = [n for n in names if n in DEBIAN_FAQ or n == "perlfaq"]
    # apt-get update exits 0 when it cannot reach the mirror, only warning; a later "Unable to locate
    # package" is then explained by that warning
    update_warning = ""
    if debian:
        try:
            update = _run(["apt-get", "update"])
        except FetchFailed as failure:
            raise SystemExit(
                f"real_datasets.py: cannot build {', '.join(debian)}: {failure} ({APT_NEEDS})"
            ) from None
        update_warning = next(
            (w for w in update.stderr.splitlines() if w.startswith("W: Failed to fetch")), ""
        )
    for name in names:
        with tempfile.TemporaryDirectory(prefix="poolrag-real-data-") as scratch:
            work = Path(scratch)
            try:
                if name in DEBIAN_FAQ:
                    counts = debian_faq(name, DEBIAN_FAQ[name], dest, work)
                elif name == "perlfaq":
                    counts = perlfaq(dest, work)
                else:
                    counts = chatterbot(name.removeprefix("chatterbot-"), dest, work)
            except FetchFailed as failure:
                needs = PYPI_NEEDS if name.startswith("chatterbot-") else APT_NEEDS
                if update_warning and name in debian and "Failed to fetch" not in str(failure):
                    needs += f"; apt-get update could not refresh the package lists: {update_warning}"
                raise SystemExit(f"real_datasets.py: cannot build {name}: {failure} ({needs})") from None
        print(f"{dest / name}: {counts['passages']} passages, {counts['queries']} queries")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dest", type=Path, default=DEFAULT_DEST, help=f"where the sets go (default {DEFAULT_DEST})"
    )
    parser.add_argument(
        "--sets", default=",".join(ALL_SETS), help=f"comma-separated (default {','.join(ALL_SETS)})"
    )
    args = parser.parse_args(argv)
    build([n.strip() for n in args.sets.split(",") if n.strip()], args.dest.expanduser())


if __name__ == "__main__":
    main()
