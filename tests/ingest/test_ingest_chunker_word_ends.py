"""A chunk cut for a byte-level BPE tokenizer ends at a word end, as one cut for WordPiece does."""

from __future__ import annotations

import pytest
from ingest_support import RUSTFMT, byte_level_bpe

from poolrag.ingest import Document, TokenChunker

#: rustfmt's README.md, "Limitations": hard-wrapped prose.
LIMITATIONS = RUSTFMT[RUSTFMT.index("Rustfmt tries") :]


@pytest.mark.parametrize("trim_offsets", [True, False], ids=["trimmed offsets", "offsets with the space"])
@pytest.mark.parametrize("max_tokens", [16, 24, 32])
def test_no_chunk_ends_inside_a_word(trim_offsets: bool, max_tokens: int) -> None:
    """A chunk whose text alone has more tokens than the document gave it (its first word merges
    otherwise without the space before it) was shortened by the excess, inside a word ("In gene" +
    "ral,"); and offsets that hold the space hid every word end from the cut and the overlap."""
    tokenizer = byte_level_bpe(LIMITATIONS, 400, trim_offsets=trim_offsets)
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
