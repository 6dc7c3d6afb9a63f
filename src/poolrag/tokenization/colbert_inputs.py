"""ColBERT's query and document inputs: marker tokens, query expansion, per-kind lengths.

:class:`~poolrag.tokenization.input_processor.InputProcessor` checks and tokenises the texts as it
does every other input; this module holds what makes the result a ColBERT input, as PyLate writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from poolrag.config.model_spec import ColbertSpec
from poolrag.errors import ModelLoadError
from poolrag.request import PoolingRequest, ResolvedParams


@dataclass(frozen=True, slots=True)
class ColbertTokenIds:
    """The token ids a ColBERT model adds to its inputs or drops from its documents' vectors."""

    query_marker: int | None  # after [CLS] in a query (``[Q]``); None when the model has none
    document_marker: int | None  # after [CLS] in a document (``[D]``)
    expansion: int | None  # pads a query to its length ([MASK], else EOS)
    skiplist: frozenset[int]  # tokens whose vectors a document drops (punctuation)

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase, spec: ColbertSpec) -> ColbertTokenIds:
        """The ids of ``spec``'s markers and skiplist words in ``tokenizer``; a marker that is not one
        of its tokens is a broken model folder."""

        def marker(text: str | None) -> int | None:
            if not text:
                return None
            token_id = tokenizer.convert_tokens_to_ids(text)
            if token_id is None or token_id == tokenizer.unk_token_id:
                raise ModelLoadError(f"ColBERT marker {text!r} is not a token of this tokenizer")
            return int(token_id)

        expansion = tokenizer.mask_token_id if tokenizer.mask_token_id is not None else tokenizer.eos_token_id
        # as PyLate: a word that is not a token converts to [UNK], which documents then drop
        skip = {tokenizer.convert_tokens_to_ids(w) for w in spec.skiplist_words}
        return cls(
            query_marker=marker(spec.query_prefix),
            document_marker=marker(spec.document_prefix),
            expansion=expansion,
            skiplist=frozenset(int(s) for s in skip if s is not None),
        )


class ColbertInputs:
    """One ColBERT model's input rules. Queries: marker after [CLS], padded with [MASK] to
    ``query_length`` (expansion tokens produce vectors but are not attended to unless configured).
    Documents: marker, truncated to ``document_length`` as PyLate does, so a longer text is cut
    without an error; punctuation is dropped later, at pooling. A request's limit shortens either
    length further."""

    def __init__(self, spec: ColbertSpec, tokenizer: PreTrainedTokenizerBase) -> None:
        self.spec = spec
        self.token_ids = ColbertTokenIds.of(tokenizer, spec)

    def marker(self, is_query: bool) -> int | None:
        """The marker token a query (or a document) carries after [CLS], if the model has one."""
        return self.token_ids.query_marker if is_query else self.token_ids.document_marker

    def budget(self, is_query: bool, limit: int | None) -> int:
        """Tokens the tokenised text may take (its special tokens included, the marker not)."""
        length = self.spec.query_length if is_query else self.spec.document_length
        if limit is not None:
            length = min(length, limit)
        return length - 1 if self.marker(is_query) is not None else length

    def request(
        self, ids: Sequence[int], params: ResolvedParams, is_query: bool, budget: int, truncated: bool
    ) -> PoolingRequest:
        """A tokenised text (at most ``budget`` tokens) as the model reads it: a query padded to
        ``budget`` with expansion tokens, then either kind with its marker after [CLS]."""
        ids = list(ids)
        attention = None
        if is_query and self.spec.do_query_expansion:
            real = len(ids)
            ids = ids + [self.token_ids.expansion] * (budget - real)
            if not self.spec.attend_to_expansion_tokens:
                attention = [1] * real + [0] * (budget - real)
        marker = self.marker(is_query)
        if marker is not None:
            ids.insert(1, marker)
            if attention is not None:
                attention.insert(1, 1)
        return PoolingRequest(
            token_ids=tuple(ids),
            params=params,
            attention=tuple(attention) if attention is not None else None,
            truncated=truncated,
        )
