"""A chunk cut for a byte-level BPE tokenizer ends at a word end, as one cut for WordPiece does."""

from __future__ import annotations

import pytest
from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from poolrag.ingest import Document, TokenChunker

#: rustfmt's README.md (Apache-2.0/MIT), "Limitations": hard-wrapped prose.
LIMITATIONS = (
    "Rustfmt tries to work on as much Rust code as possible. Sometimes, the code\n"
    "doesn't even need to compile! In general, we are looking to limit areas of\n"
    "instability; in particular, post-1.0, the formatting of most code should not\n"
    "change as Rustfmt improves. However, there are some things that Rustfmt can't\n"
    "do or can't do well (and thus where formatting might change significantly,\n"
    "even post-1.0). We would like to reduce the list of limitations over time.\n"
)


def _byte_level_bpe(trim_offsets: bool) -> PreTrainedTokenizerFast:
    """Offsets trimmed of the space before a word (RoBERTa's) or holding it (GPT-2's, Qwen's)."""
    trained = ByteLevelBPETokenizer(trim_offsets=trim_offsets)
    trained.train_from_iterator([LIMITATIONS], vocab_size=400, show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer)


@pytest.mark.parametrize("trim_offsets", [True, False], ids=["trimmed offsets", "offsets with the space"])
@pytest.mark.parametrize("max_tokens", [16, 24, 32])
def test_no_chunk_ends_inside_a_word(trim_offsets: bool, max_tokens: int) -> None:
    """A chunk whose text alone has more tokens than the document gave it (its first word merges
    otherwise without the space before it) was shortened by the excess, inside a word ("In gene" +
    "ral,"); and offsets that hold the space hid every word end from the cut and the overlap."""
    tokenizer = _byte_level_bpe(trim_offsets)
    chunker = TokenChunker(tokenizer, max_tokens=max_tokens, overlap=max_tokens // 4)
    chunks = chunker.split(Document("README.md", LIMITATIONS))
    assert len(chunks) > 3
    inside = [
        f"{LIMITATIONS[c.end - 12 : c.end]!r}|{LIMITATIONS[c.end : c.end + 6]!r}"
        for c in chunks
        if c.end < len(LIMITATIONS) and LIMITATIONS[c.end - 1].isalnum() and LIMITATIONS[c.end].isalnum()
    ]
    assert inside == []
    for chunk in chunks:
        assert LIMITATIONS[chunk.start : chunk.end] == chunk.text
        assert chunk.num_tokens == len(tokenizer(chunk.text, add_special_tokens=False)["input_ids"])
        assert chunk.num_tokens <= max_tokens
