"""A small corpus written to disk, and helpers shared by the ingestion tests."""

from __future__ import annotations

from pathlib import Path

from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

TOPICS = {
    "bees.md": (
        "# Honeybees\n\nHoneybee foragers tell their sisters where flowers are with the waggle dance. "
        "The angle of the dance points to the food relative to the sun.\n\nThe duration of the waggle run "
        "tells the distance to the flowers. Colonies reproduce by swarming in spring.\n\nA colony has one "
        "queen, thousands of workers and a few hundred drones in summer."
    ),
    "tides.txt": (
        "Tides are caused mainly by the Moon's gravity, which raises two bulges in the oceans.\n\nWhen the "
        "Sun and the Moon line up, their pulls add together and produce large spring tides.\n\nAt the "
        "quarter moons the pulls partly cancel and the tides are smaller; these are neap tides."
    ),
    "bread.md": (
        "# Sourdough\n\nSourdough bread rises with a starter of wild yeast and lactic acid bacteria.\n\nThe "
        "dough ferments slowly, is shaped, proofed overnight and baked in a very hot covered pot.\n\nSteam "
        "keeps the crust soft long enough for the loaf to expand in the oven."
    ),
    "rust.md": (
        "# Ownership\n\nRust manages memory through ownership: every value has exactly one owner.\n\nThe "
        "borrow checker allows one mutable reference or many shared ones, never both at once.\n\nThis rules "
        "out data races and use-after-free bugs at compile time."
    ),
    "chess.txt": (
        "Good chess openings control the centre, develop knights and bishops and castle early.\n\nPopular "
        "first moves are e4 and d4, leading to the Sicilian Defence or the Queen's Gambit.\n\nBeginners "
        "should learn opening principles rather than memorising long lines."
    ),
}


def write_corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in TOPICS.items():
        (root / name).write_text(text)
    return root


def read_folder(folder: Path) -> tuple[list[str], dict[str, str]]:
    """What :func:`~poolrag.ingest.read_paths` makes of a folder: the names of the files it read,
    and each left-out file's reason by name."""
    from poolrag.ingest import read_paths

    skipped: list = []
    read = [Path(doc.source).name for doc in read_paths([folder], skipped=skipped)]
    return read, {Path(s.path).name: s.reason for s in skipped}


#: rustfmt's README.md (Apache-2.0/MIT): badge URLs longer than a small piece, then hard-wrapped prose.
RUSTFMT = (
    "# rustfmt [![linux](https://github.com/rust-lang/rustfmt/actions/workflows/linux.yml/badge.svg"
    "?event=push)](https://github.com/rust-lang/rustfmt/actions/workflows/linux.yml)\n\n"
    "A tool for formatting Rust code according to style guidelines.\n\n"
    "Rustfmt tries to work on as much Rust code as possible. Sometimes, the code\n"
    "doesn't even need to compile! In general, we are looking to limit areas of\n"
    "instability; in particular, post-1.0, the formatting of most code should not\n"
    "change as Rustfmt improves. However, there are some things that Rustfmt can't\n"
    "do or can't do well (and thus where formatting might change significantly,\n"
    "even post-1.0). We would like to reduce the list of limitations over time.\n"
)


def byte_level_bpe(text: str, vocab_size: int, *, trim_offsets: bool = False) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on ``text`` (RoBERTa, GPT-2, Qwen, ModernBERT), its offsets holding the
    space before a word (GPT-2's) or trimmed of it (RoBERTa's), here by a post-processor that adds a
    prefix space (as RoBERTa's does with ``add_prefix_space=True``)."""
    trained = ByteLevelBPETokenizer(trim_offsets=trim_offsets)
    trained.train_from_iterator([text], vocab_size=vocab_size, show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer)
