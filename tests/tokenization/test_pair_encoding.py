"""A rerank's query is tokenised (and cut) once per request, not once per document: 3 MB of query
beside 10 documents took ten times as long as beside one. The pairs' ids stay the tokenizer's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from poolrag.request import ResolvedParams
from poolrag.tokenization.input_processor import InputProcessor, PromptSettings

MAX_LEN = 128


class _CountingBackend:
    """A fast tokenizer's own Rust tokenizer, recording each text it is given to encode."""

    def __init__(self, backend: Any) -> None:
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "texts", [])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._backend, name, value)

    def encode(self, sequence: Any, pair: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.texts.extend([sequence, pair])
        return self._backend.encode(sequence, pair, *args, **kwargs)

    def encode_batch(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        for item in inputs:
            self.texts.extend(item if isinstance(item, (tuple, list)) else [item])
        return self._backend.encode_batch(inputs, *args, **kwargs)


@pytest.mark.parametrize(
    "query",
    ["x" * 20_000, "a long query " * 20_000],
    ids=["no-cut-point-so-kept-whole", "cut-before-a-space"],
)
def test_a_query_is_tokenised_as_often_beside_eight_documents_as_beside_two(
    minilm_path: Path, query: str
) -> None:
    reference = AutoTokenizer.from_pretrained(minilm_path)
    times_seen = {}
    for count in (2, 8):
        tokenizer = AutoTokenizer.from_pretrained(minilm_path)
        backend = _CountingBackend(tokenizer._tokenizer)
        tokenizer._tokenizer = backend  # what tokenizer.backend_tokenizer and every call use
        processor = InputProcessor(tokenizer, MAX_LEN, PromptSettings({}))
        documents = [f"document number {i} about something" for i in range(count)]
        pairs = InputProcessor.checked_pairs(query, documents)
        requests = processor.pairs(pairs, ResolvedParams(task="score"), truncate=-1)
        times_seen[count] = sum(
            1
            for text in backend.texts
            if isinstance(text, str) and len(text) > 100 and query.startswith(text)
        )
        expected = reference([query] * count, documents, truncation="longest_first", max_length=MAX_LEN)
        assert [list(request.token_ids) for request in requests] == expected["input_ids"]
        assert [list(request.token_type_ids or ()) for request in requests] == expected["token_type_ids"]
    assert times_seen[2] == times_seen[8] >= 1


def test_the_tokenizers_own_settings_are_as_they_were_after_a_cut_pair(minilm_path: Path) -> None:
    """The backend is the tokenizer's, shared with anyone counting tokens with it: a cut score
    left it truncating every text to the pair's limit. (transformers' own call leaves the backend
    set as its last call asked, so the once-per-tokenizer probe runs first, here as in a server.)"""
    from poolrag.tokenization.pair_encoding import encode_pairs

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    encode_pairs(tokenizer, ["probe"], ["probe"], None, type_ids=True)
    tokenizer("the folder's", "own settings")  # as the folder's tokenizer.json sets them up
    backend = tokenizer.backend_tokenizer
    before = (backend.truncation, backend.padding, backend.encode_special_tokens)
    long = "word " * 50
    counted = backend.encode(long).ids
    assert len(encode_pairs(tokenizer, ["a query"], [long], 8, type_ids=True)["input_ids"][0]) == 8
    assert (backend.truncation, backend.padding, backend.encode_special_tokens) == before
    assert backend.encode(long).ids == counted
