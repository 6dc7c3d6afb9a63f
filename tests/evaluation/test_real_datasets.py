"""The real-data script's parsers on tiny inline samples of each format (never the real text), and the
BEIR files it writes read back with poolrag's own reader."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from poolrag.evaluation import BeirDataset

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_datasets.py"

DOCBOOK = """<html><head><title>FAQ</title><style>h2 { color: red }</style></head><body>
<div class="navheader"><table><tr><td><h2>Not a section?</h2></td></tr></table></div>
<div class="chapter"><div class="titlepage"><h1 class="title">Chapter 1. Basics</h1></div>
<p>Intro text of the chapter, before any section.</p>
<div class="section"><div class="titlepage">
<h2 class="title"><a id="x"></a>1.1. What is <em>Debian</em>?</h2></div>
<p>Debian is a   free operating system.</p><ul><li>It has &amp; packages.</li></ul></div>
<div class="section"><h3>1.1.1. History</h3><p>Started in 1993.</p></div>
<div class="section"><h4>1.1.2. How do I install it?</h4><p>Use the installer.</p></div>
</div>
<div class="navfooter"><p>Next: chapter 2</p><div><p>nested footer</p></div></div>
</body></html>"""

POD = """=head1 NAME

perlfaqX - Sample

=head2 How do I print C<< $x->{y} >> to B<STDOUT>?

Use L<print|perlfunc/print> with E<lt>STDOUTE<gt>:

    print STDOUT $x->{y};

=over 4

=item Z<>first

=item *

a bullet

=back

=head2 Why is I<this> slow?

Because of F</tmp/x>.

=head1 AUTHOR

Someone.
"""

YAML = """categories:
- greetings
conversations:
- - Hello
  - Hi there!
  - How are you?
- - Hello
  - Greetings.
- - lonely line
"""


@pytest.fixture(scope="module")
def real() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_datasets", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_docbook_sections_are_questions_when_their_title_asks(real: ModuleType) -> None:
    pairs = real.docbook_pairs(DOCBOOK)
    assert [(p.question, p.answer) for p in pairs] == [
        ("What is Debian?", "Debian is a free operating system. It has & packages."),
        ("", "Started in 1993."),  # a passage no query asks for
        ("How do I install it?", "Use the installer."),
    ]


def test_pod_head2_is_a_question_and_formatting_codes_become_text(real: ModuleType) -> None:
    pairs = real.pod_pairs(POD)
    assert [p.question for p in pairs] == ["How do I print $x->{y} to STDOUT?", "Why is this slow?"]
    assert pairs[0].answer == "Use print with <STDOUT>: print STDOUT $x->{y}; first a bullet"
    assert pairs[1].answer == "Because of /tmp/x."  # the =head1 after it ends the answer


def test_chatterbot_prompts_are_judged_by_every_reply(real: ModuleType, tmp_path: Path) -> None:
    pairs = real.chatterbot_pairs(YAML)
    assert [(p.question, p.answer) for p in pairs] == [
        ("Hello", "Hi there!"),
        ("Hello", "How are you?"),
        ("Hello", "Greetings."),
    ]
    counts = real.write_beir(pairs, tmp_path / "set", {"package": "pypi:x", "licence": "BSD-3-Clause"})
    assert counts == {"passages": 3, "queries": 1}
    dataset = BeirDataset(tmp_path / "set")
    (query,) = list(dataset.queries())
    assert query.text == "Hello" and set(dataset.qrels()[query.id]) == {"d0", "d1", "d2"}
    source = json.loads((tmp_path / "set" / "SOURCE.json").read_text())
    assert source == {"package": "pypi:x", "licence": "BSD-3-Clause", "passages": 3, "queries": 1}


def test_passages_without_questions_stay_in_the_corpus(real: ModuleType, tmp_path: Path) -> None:
    pairs = real.docbook_pairs(DOCBOOK)
    real.write_beir(pairs, tmp_path / "faq", {"package": "debian:x"})
    dataset = BeirDataset(tmp_path / "faq")
    assert [d.text for d in dataset.documents()] == [p.answer for p in pairs]
    assert {q.text for q in dataset.queries()} == {"What is Debian?", "How do I install it?"}
