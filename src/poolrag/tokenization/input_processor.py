"""Turn user inputs into :class:`PoolingRequest` objects.

All tokenisation happens here, in one batched call to the fast (Rust) tokenizer per request list
(pairs through :mod:`poolrag.tokenization.pair_encoding`, which encodes a shared query once), so
the model layers below only ever see token ids. So does the check of every text a request
carries (:func:`checked_texts`, :mod:`poolrag.text_validity`'s rule), once per input: the server
and the engine's other doors leave it to this stage and name its errors in their own words.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from transformers import PreTrainedTokenizerBase

from poolrag.config.model_spec import ColbertSpec
from poolrag.errors import (
    InputTooLongError,
    InputTypeError,
    InvalidImageError,
    InvalidInputError,
    InvalidTextError,
)
from poolrag.image_inputs import is_image_input, other_data_url, text_only
from poolrag.input_shapes import score_pairs
from poolrag.prompt_inputs import PromptInput, TokensPrompt
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.text_validity import check_text, lone_surrogate
from poolrag.tokenization.chunked_inputs import check_embed_cap, chunked_request, special_frame
from poolrag.tokenization.colbert_inputs import ColbertInputs
from poolrag.tokenization.images import ImagePreprocessor
from poolrag.tokenization.page_inputs import PagePreprocessor
from poolrag.tokenization.pair_encoding import encode_pairs
from poolrag.tokenization.text_cut import RememberedCut, TextCut, text_cut_of
from poolrag.tokenization.tokenizer_lock import call_tokenizer

logger = logging.getLogger(__name__)


#: The folder prompts ``input_type`` selects: "query" for queries, the first of these for documents.
QUERY_PROMPT_NAME = "query"
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus", "doc")
#: A character that is not whitespace (``str.isspace``'s rule): a word left after a cut.
_TEXT = re.compile(r"\S")
#: Texts tokenised in one call: the tokenizer's encodings (offsets, masks, words of every token) are
#: several times the ids a request keeps, so a call of 50,000 texts tokenised at once peaked ~190 MB
#: above one tokenised this many at a time (all-MiniLM-L6-v2).
TOKENIZE_PART = 1024
#: An over-long pair is named by its longer text (``text_2[3]``, a route's ``documents[3]``).
_PAIR_REMEDY = (
    "counted with the other text of its pair; shorten it or pass truncate_prompt_tokens to truncate"
)


def role_prompt_names(prompt_names: Sequence[str]) -> list[str]:
    """The names among a folder's prompts that ``input_type`` selects: where there is one, a query
    and a document are embedded differently, so a caller must say which a text is."""
    return [n for n in prompt_names if n == QUERY_PROMPT_NAME or n in DOCUMENT_PROMPT_NAMES]


def token_limit(truncate: int | None, max_len: int) -> int | None:
    """The tokens an input is cut to (``truncate_prompt_tokens``: -1 the model's length, never more
    than it), or ``None`` when an over-long input must be an error."""
    return None if truncate is None else (max_len if truncate == -1 else min(truncate, max_len))


def checked_texts(values: Sequence[object], field: str, one: bool = False) -> list[str]:
    """Each text if a model can read it, named ``field`` when the caller gave one text (``one``),
    else ``field[i]``: the one check of a request's texts."""
    if one:
        return [check_text(value, field) for value in values]
    return [check_text(value, field, i) for i, value in enumerate(values)]


@dataclass(slots=True)
class PromptSettings:
    """The model folder's instruction prompts (sentence-transformers ``prompts``)."""

    prompts: dict[str, str]
    default_prompt_name: str | None = None

    def chosen(self, prompt: str | None, prompt_name: str | None) -> str | None:
        """The caller's own prompt, given as text or named from the folder's prompts (the name was
        checked against the model by ``PoolingParams.verify``); None leaves the choice to ``prefix_for``."""
        return self.prompts[prompt_name] if prompt_name is not None else prompt

    def prefix_for(self, input_type: str | None, explicit: str | None) -> str:
        if explicit is not None:
            return explicit
        if input_type == "query" and QUERY_PROMPT_NAME in self.prompts:
            return self.prompts[QUERY_PROMPT_NAME]
        if input_type == "document":
            return next((self.prompts[name] for name in DOCUMENT_PROMPT_NAMES if name in self.prompts), "")
        if input_type is None and self.default_prompt_name:
            return self.prompts.get(self.default_prompt_name, "")
        return ""


class InputProcessor:
    """Tokenises single texts, text pairs and ColBERT queries/documents for one model, and prepares
    the images of a model that reads them."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_len: int,
        prompts: PromptSettings,
        colbert: ColbertSpec | None = None,
        uses_token_type_ids: bool = True,
        chunked: bool = False,
        max_embed_len: int | None = None,
        images: ImagePreprocessor | None = None,
        include_prompt: bool = True,
    ) -> None:
        if getattr(tokenizer, "truncation_side", "right") == "left":
            # poolrag keeps a long input's first tokens, whatever the folder says: every route
            # documents it, and a text is cut before tokenising on that rule
            logger.warning(
                "this model's tokenizer was saved with truncation_side='left' (keep a long input's last "
                "tokens); poolrag keeps the first tokens, where sentence-transformers would keep the last"
            )
            tokenizer.truncation_side = "right"
        self.tokenizer = tokenizer
        self.images = images  # a model that reads images too (CLIP): their preprocessing
        self.max_len = max_len
        self.chunked = chunked  # split over-long embed inputs instead of refusing them
        self.max_embed_len = max_embed_len
        self.prompts = prompts
        self.include_prompt = include_prompt  # false: each request counts its prompt's rows
        self.uses_token_type_ids = uses_token_type_ids and "token_type_ids" in tokenizer.model_input_names
        self.colbert_inputs = ColbertInputs(colbert, tokenizer) if colbert else None

    @property
    def text_cut(self) -> TextCut:
        """Where this tokenizer's long texts may be cut before tokenising (built on first use)."""
        return text_cut_of(self.tokenizer)

    def _kept_text(self, text: str, limit: int | None, chunking: bool, field: str, index: int | None) -> str:
        """``text`` cut to what tokenising can keep: ``limit`` tokens when truncating. Without
        truncation a text that holds more than the model's maximum is refused here, its tokens
        counted window by window rather than held all at once."""
        if limit is not None:
            return self.text_cut.prefix(text, limit)
        if chunking:
            return text  # every token is embedded, chunk by chunk
        if len(self.text_cut.prefix(text, self.max_len + 1)) < len(text):
            specials = self.tokenizer.num_special_tokens_to_add(pair=False)
            raise InputTooLongError(self.text_cut.count(text) + specials, self.max_len, field, index)
        return text

    # -- inputs already tokenised ----------------------------------------------------------------
    def frame_ids(self, ids: Sequence[int], input_type: str | None = None) -> list[int] | None:
        """The ids the text path gives a text whose bare tokens (no special tokens) are ``ids``.

        Callers that tokenised a text already (the ingest chunker) send the result as a token
        prompt and skip a second tokenisation. ``None`` where that would not be the same model
        input: an instruction prompt is prepended for ``input_type``, the model is ColBERT (marker
        tokens), or this tokenizer's special tokens are not one fixed frame around the text.
        """
        if self.colbert_inputs is not None or self.prompts.prefix_for(input_type, None):
            return None
        frame = self._frame
        if frame is None:
            return None
        head, tail = frame
        return [*head, *ids, *tail]

    @cached_property
    def _frame(self) -> tuple[list[int], list[int]] | None:
        """The special tokens around every text, checked on probe texts of different shapes (on
        first use)."""
        frames = set()
        for probe in ("a", "Hello, world.", "  two\n\nparagraphs, naïve 日本 words  "):
            full = call_tokenizer(self.tokenizer, probe, add_special_tokens=True)["input_ids"]
            bare = call_tokenizer(self.tokenizer, probe, add_special_tokens=False)["input_ids"]
            frame = special_frame(full, bare)
            if frame is None:
                return None
            frames.add((tuple(frame[0]), tuple(frame[1])))
        if len(frames) != 1:
            return None
        head, tail = frames.pop()
        return list(head), list(tail)

    # -- limits ---------------------------------------------------------------------------------
    def _check_room(self, limit: int, pair: bool = False, marker: bool = False, prefix: str = "") -> None:
        """Refuse a limit that leaves no token of text (of each text of a pair) beside the special
        tokens and the prompt; the tokenizer itself would log an error and return the text uncut,
        or keep the prompt alone."""
        specials = self.tokenizer.num_special_tokens_to_add(pair=pair) + int(marker)
        prompt = self.text_cut.count(prefix) if prefix else 0
        least = specials + prompt + (2 if pair else 1)
        if limit < least:
            each = "pair" if pair else "input"
            taken = f" and the prompt takes {prompt}" if prompt else ""
            if limit == self.max_len:  # the model's own length, not a limit the caller gave
                raise InvalidInputError(
                    f"the prompt leaves no room for text: this model reads {limit} tokens, adds "
                    f"{specials} special tokens to each {each}{taken}",
                    param="prompt",
                )
            raise InvalidInputError(
                f"truncate_prompt_tokens={limit} leaves no room for text: this model adds {specials} "
                f"special tokens to each {each}{taken}, so it must be at least {least}",
                param="truncate_prompt_tokens",
            )

    def _cut(
        self, encoded: Any, j: int, limit: int | None, wholes: Sequence[str], kept: Sequence[str]
    ) -> bool:
        """Whether row ``j`` of ``encoded`` (the tokenised ``kept`` texts, cut from ``wholes``)
        lost tokens to the ``limit``: a text cut before tokenising with words left after the cut,
        or the tokenizer's own truncation (a fast tokenizer's overflow, else a count)."""
        if limit is None or len(encoded["input_ids"][j]) < limit:
            return False
        if any(len(k) < len(w) and _TEXT.search(w, len(k)) for w, k in zip(wholes, kept, strict=True)):
            return True  # words left after the cut (searched in place: a query's rest is megabytes)
        encodings = getattr(encoded, "encodings", None)
        if encodings is not None:
            return bool(encodings[j].overflowing)
        specials = self.tokenizer.num_special_tokens_to_add(pair=len(kept) == 2)
        return sum(self.text_cut.count(k) for k in kept) + specials > limit

    def _check_length(self, ids: Sequence[int], field: str, index: int | None) -> None:
        if len(ids) > self.max_len:
            raise InputTooLongError(len(ids), self.max_len, field, index)

    # -- single texts -------------------------------------------------------------------------
    def texts(
        self,
        prompts: Sequence[PromptInput],
        params: ResolvedParams,
        truncate: int | None,
        prompt: str | None,
        field: str = "input",
        one: bool = False,
        pending_images: bool = False,
    ) -> list[PoolingRequest]:
        """One request per prompt; errors name ``field`` (``field[i]`` unless the caller gave ``one``).

        ``pending_images``: an image's request may be a ``Future`` still being prepared on the
        image pool (``ModelExecutor.execute_as_ready`` takes such a list); otherwise every request is
        ready when this returns."""
        limit = token_limit(truncate, self.max_len)
        if self.colbert_inputs is not None and params.task in ("token_embed", "score"):
            return self._colbert(prompts, params, limit, field, one)
        if isinstance(self.images, PagePreprocessor):
            return self._page_inputs(self.images, prompts, params, field, one, pending_images)
        prefix = self._prefix(params, prompt)
        chunking = self.chunked and params.task == "embed" and limit is None
        requests: list[PoolingRequest | None] = [None] * len(prompts)
        images: dict[int, tuple[object, str]] = {}
        wholes: dict[int, str] = {}  # position: the text with its prompt
        kept: dict[int, str] = {}  # position: what tokenising keeps of it
        for i, item in enumerate(prompts):
            index = None if one else i
            name = field if index is None else f"{field}[{index}]"
            if isinstance(item, dict):
                requests[i] = self._from_token_ids(item, params, limit, field, index)
            elif is_image_input(item) and (self.images is not None or not isinstance(item, str)):
                # a data: URL is a text to a text-only model
                images[i] = (item, name)
            elif self.images is not None and (kind := other_data_url(item)) is not None:
                raise _not_an_image(name, kind)
            else:
                wholes[i] = prefix + check_text(item, field, index)
                kept[i] = self._kept_text(wholes[i], limit, chunking, field, index)
        if images:
            prepared = self._images(list(images.values()), params, pending_images)
            for i, request in zip(images, prepared, strict=True):
                requests[i] = request
        if kept:
            if limit is not None:
                self._check_room(limit, prefix=prefix)
            prompt_length = self._prompt_length(prefix)
            if chunking and prompt_length:
                # a left-out prompt must end inside the first chunk, with text after it: the chunks
                # past it pool whole, and the first weighs by its rows less the prompt's
                self._check_room(self.max_len, prefix=prefix)
            encoded = self._encode_texts(wholes, kept, params, limit, chunking, field, one, prompt_length)
            for i, request in zip(kept, encoded, strict=True):
                requests[i] = request
        return requests  # type: ignore[return-value]

    def _prefix(self, params: ResolvedParams, prompt: str | None) -> str:
        """The instruction prompt put before each text: the caller's ``prompt``, checked, else the
        model folder's for the input type."""
        if prompt is not None and (at := lone_surrogate(prompt)) is not None:
            raise InvalidInputError(
                f"prompt is not valid Unicode (lone surrogate at character {at})", param="prompt"
            )
        return self.prompts.prefix_for(params.input_type, prompt)

    def _prompt_length(self, prefix: str) -> int:
        """The rows a Pooling module with ``include_prompt: false`` leaves out, counted as
        sentence-transformers counts them: the prompt tokenised alone with the special tokens, less
        the special token that closes it there ([SEP], EOS), so a [CLS] / BOS before it is left
        out too. Nothing when the model pools the prompt or there is none."""
        if self.include_prompt or not prefix:
            return 0
        ids = call_tokenizer(self.tokenizer, prefix, add_special_tokens=True)["input_ids"]
        return len(ids) - int(bool(ids) and ids[-1] in self.tokenizer.all_special_ids)

    def _encode_texts(
        self,
        wholes: dict[int, str],
        kept: dict[int, str],
        params: ResolvedParams,
        limit: int | None,
        chunking: bool,
        field: str,
        one: bool,
        prompt_length: int,
    ) -> list[PoolingRequest]:
        """The ``kept`` texts (by position in the caller's list; cut from ``wholes``) tokenised
        :data:`TOKENIZE_PART` at a time, one request each: a chunked one for an embed input over the
        window when ``chunking`` (its first chunk holds the prompt)."""
        positions = list(kept)
        out: list[PoolingRequest] = []
        for start in range(0, len(positions), TOKENIZE_PART):
            part = positions[start : start + TOKENIZE_PART]
            texts = [kept[pos] for pos in part]
            encoded = call_tokenizer(
                self.tokenizer,
                texts,
                add_special_tokens=True,
                truncation=limit is not None,
                max_length=limit,
                return_token_type_ids=self.uses_token_type_ids,
                return_attention_mask=False,
            )
            type_ids = encoded.get("token_type_ids") if self.uses_token_type_ids else None
            for j, pos in enumerate(part):
                ids = encoded["input_ids"][j]
                if chunking:
                    check_embed_cap(ids, self.max_embed_len)
                    if len(ids) > self.max_len:
                        out.append(
                            chunked_request(
                                self.tokenizer,
                                texts[j],
                                ids,
                                params,
                                self.max_len,
                                self.uses_token_type_ids,
                                prompt_length,
                            )
                        )
                        continue
                self._check_length(ids, field, None if one else pos)
                out.append(
                    PoolingRequest(
                        token_ids=tuple(ids),
                        params=params,
                        token_type_ids=tuple(type_ids[j]) if type_ids is not None else None,
                        truncated=self._cut(encoded, j, limit, [wholes[pos]], [texts[j]]),
                        prompt_length=prompt_length,
                    )
                )
        return out

    def _page_inputs(
        self,
        pages: PagePreprocessor,
        prompts: Sequence[PromptInput],
        params: ResolvedParams,
        field: str,
        one: bool,
        pending: bool,
    ) -> list[PoolingRequest]:
        """A page retriever's inputs: an image is a page, a text a query; its processor writes both
        (a prompt, image tokens, augmentation tokens), so neither is cut to a token limit: a query
        longer than the model reads is refused."""
        requests: list[PoolingRequest | None] = [None] * len(prompts)
        images: dict[int, tuple[object, str]] = {}
        queries: dict[int, str] = {}
        for i, item in enumerate(prompts):
            index = None if one else i
            name = field if index is None else f"{field}[{index}]"
            if isinstance(item, dict):
                requests[i] = self._from_token_ids(item, params, None, field, index)
            elif is_image_input(item):
                images[i] = (item, name)
            elif (kind := other_data_url(item)) is not None:
                raise _not_an_image(name, kind)
            elif params.input_type == "document":  # scored as a page, a text would rank among them
                raise InvalidImageError(
                    name, "a page retriever's documents are pages (an image or a rendered PDF page), not text"
                )
            else:
                queries[i] = check_text(item, field, index)
        if images:
            for i, request in zip(images, self._images(list(images.values()), params, pending), strict=True):
                requests[i] = request
        if queries:
            for i, request in zip(queries, pages.queries(list(queries.values()), params), strict=True):
                requests[i] = request
        return requests  # type: ignore[return-value]

    def _images(self, items: list[tuple[object, str]], params: ResolvedParams, pending: bool) -> list[Any]:
        """The requests of ``items``, prepared by the model's image preprocessor (futures being
        prepared where ``pending``); a text-only model refuses the first."""
        if self.images is None:
            raise text_only(items[0][1])
        return self.images.request_futures(items, params) if pending else self.images.requests(items, params)

    def _from_token_ids(
        self, item: TokensPrompt, params: ResolvedParams, limit: int | None, field: str, index: int | None
    ) -> PoolingRequest:
        name = field if index is None else f"{field}[{index}]"
        if "prompt_token_ids" not in item and item.get("type") in ("text", "image_url"):
            raise InputTypeError(
                f"{name}: an OpenAI content part is not an input here; give its text, or its image "
                "(the data:image URL of image_url.url), as the input itself",
                param=field,
            )
        modality = next((key for key in ("image", "text") if key in item), None)
        if "prompt_token_ids" not in item and modality is not None:  # sentence-transformers', Jina's
            raise InputTypeError(
                f"{name}: {{'{modality}': ...}} is not an input here; give the {modality} itself "
                "as the input",
                param=field,
            )
        ids = item.get("prompt_token_ids")
        if not isinstance(ids, (list, tuple)) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ids
        ):
            raise InputTypeError(f"{name}: prompt_token_ids must be a list of integers", param=field)
        if not ids:
            raise InvalidTextError(field, index, "is empty (no token ids)")
        vocab = len(self.tokenizer)
        if any(t < 0 or t >= vocab for t in ids):
            raise InvalidInputError(f"{name}: token ids must be in [0, {vocab})", param=field)
        self._refuse_unframed(ids, name, field)
        cut = limit is not None and len(ids) > limit
        if cut:
            ids = ids[:limit]
        self._check_length(ids, field, index)
        return PoolingRequest(token_ids=tuple(ids), params=params, truncated=cut)

    def _refuse_unframed(self, ids: Sequence[int], name: str, field: str) -> None:
        """Ids with neither the first nor the last special token of a tokenizer that frames every
        text on both sides (BERT's [CLS] … [SEP]) were made by another tokenizer: LangChain's
        ``OpenAIEmbeddings`` sends tiktoken's by default, and their vectors would be wrong without a
        word. Ids this tokenizer made keep its first token even cut. A decoder's BOS alone is not
        checked: its ids are often assembled by hand."""
        frame = self._frame
        if frame is None or not (frame[0] and frame[1]):
            return
        head, tail = frame
        if list(ids[: len(head)]) == head or list(ids[-len(tail) :]) == tail:
            return
        first = " ".join(self.tokenizer.convert_ids_to_tokens(head))
        raise InvalidInputError(
            f"{name}: token ids that do not start with this model's {first}: ids from another tokenizer "
            "give wrong vectors (LangChain's OpenAIEmbeddings sends tiktoken ids unless "
            "check_embedding_ctx_length=False); send text, or this model's own ids",
            param=field,
        )

    # -- pairs (cross-encoders) -----------------------------------------------------------------
    @staticmethod
    def checked_pairs(text_1: str | Sequence[str], text_2: str | Sequence[str]) -> list[tuple[str, str]]:
        """A score call's (``text_1``, ``text_2``) pairs, 1:1, 1:N or N:N, each text checked once
        (one query is checked once however many documents it goes with)."""
        firsts, seconds = score_pairs(text_1, text_2)
        firsts = checked_texts(firsts, "text_1", isinstance(text_1, str))
        seconds = checked_texts(seconds, "text_2", isinstance(text_2, str))
        return list(zip(firsts * len(seconds) if len(firsts) == 1 else firsts, seconds, strict=True))

    def pairs(
        self, pairs: Sequence[tuple[str, str]], params: ResolvedParams, truncate: int | None
    ) -> list[PoolingRequest]:
        """One request per pair read jointly (the pairs checked already, by :meth:`checked_pairs`)."""
        if not pairs:
            return []
        limit = token_limit(truncate, self.max_len)
        if limit is not None:
            self._check_room(limit, pair=True)
        cut = RememberedCut(self.text_cut)  # a query beside every document is cut once
        one_first = len({first for first, _ in pairs}) == 1  # 1:N (or 1:1): the query is named with no index
        kept = [
            self._kept_pair(first, second, limit, cut, (j, one_first))
            for j, (first, second) in enumerate(pairs)
        ]
        encoded = encode_pairs(
            self.tokenizer,
            [first for first, _ in kept],
            [second for _, second in kept],
            limit,
            self.uses_token_type_ids,
        )
        type_ids = encoded.get("token_type_ids") if self.uses_token_type_ids else None
        out = []
        for j, ids in enumerate(encoded["input_ids"]):
            if len(ids) > self.max_len:
                raise self._too_long_pair(len(ids), pairs[j], cut, (j, one_first))
            out.append(
                PoolingRequest(
                    token_ids=tuple(ids),
                    params=params,
                    token_type_ids=tuple(type_ids[j]) if type_ids is not None else None,
                    truncated=self._cut(encoded, j, limit, pairs[j], kept[j]),
                )
            )
        return out

    def _too_long_pair(
        self, total: int, pair: tuple[str, str], cut: RememberedCut, place: tuple[int, bool]
    ) -> InputTooLongError:
        """An over-long pair named by its longer text, as an over-long single text is named:
        ``text_2[3]``, or ``text_1`` (``text_1[3]`` when the pairs' first texts differ)."""
        (first, second), (index, one_first) = pair, place
        if cut.count(first) > cut.count(second):
            return InputTooLongError(
                total, self.max_len, "text_1", None if one_first else index, _PAIR_REMEDY
            )
        return InputTooLongError(total, self.max_len, "text_2", index, _PAIR_REMEDY)

    def _kept_pair(
        self, first: str, second: str, limit: int | None, cut: RememberedCut, place: tuple[int, bool]
    ) -> tuple[str, str]:
        """A pair cut to what tokenising can keep (see :meth:`_kept_text`). Truncation
        ``longest_first`` keeps more of the longer text (of the second on a tie), so cut texts
        must keep the whole texts' order; they are cut further out where they would not.
        ``place``: the pair's index and whether every pair has the same first text (its error's name)."""
        if limit is None:
            specials = self.tokenizer.num_special_tokens_to_add(pair=True)
            for text in (first, second):
                if len(cut.prefix(text, self.max_len + 1)) < len(text):
                    total = cut.count(first) + cut.count(second) + specials
                    raise self._too_long_pair(total, (first, second), cut, place)
            return first, second
        head_1, head_2 = cut.prefix(first, limit), cut.prefix(second, limit)
        cut_1, cut_2 = len(head_1) < len(first), len(head_2) < len(second)
        if not (cut_1 or cut_2):
            return first, second
        n_1, n_2 = cut.count(head_1), cut.count(head_2)
        if (cut_1 and not cut_2 and n_1 > n_2) or (cut_2 and not cut_1 and n_2 >= n_1):
            return head_1, head_2  # the cut text stays the longer one
        whole_1 = cut.count(first) if cut_1 else n_1
        whole_2 = cut.count(second) if cut_2 else n_2
        if whole_1 > whole_2 and n_1 <= n_2:
            head_1 = cut.prefix(first, n_2 + 1)
        elif whole_1 <= whole_2 and n_1 > n_2:
            head_2 = cut.prefix(second, n_1)
        return head_1, head_2

    # -- ColBERT ----------------------------------------------------------------------------------
    @property
    def colbert_skiplist(self) -> frozenset[int]:
        return self.colbert_inputs.token_ids.skiplist if self.colbert_inputs else frozenset()

    def _colbert(
        self, prompts: Sequence[PromptInput], params: ResolvedParams, limit: int | None, field: str, one: bool
    ) -> list[PoolingRequest]:
        """ColBERT queries or documents (the rules: :class:`ColbertInputs`), tokenised in one call."""
        colbert = self.colbert_inputs
        assert colbert is not None
        is_query = params.input_type == "query"
        if limit is not None:
            self._check_room(limit, marker=colbert.marker(is_query) is not None)
        budget = colbert.budget(is_query, limit)
        if any(isinstance(p, dict) for p in prompts):
            raise InputTypeError("ColBERT inputs must be text")
        wholes = checked_texts(prompts, field, one)
        texts = [self.text_cut.prefix(t, budget) for t in wholes]
        encoded = call_tokenizer(
            self.tokenizer,
            texts,
            add_special_tokens=True,
            truncation=True,
            max_length=budget,
            return_token_type_ids=False,
            return_attention_mask=False,
        )
        return [
            colbert.request(
                ids,
                params,
                is_query,
                budget,
                self._cut(encoded, j, budget, wholes[j : j + 1], texts[j : j + 1]),
            )
            for j, ids in enumerate(encoded["input_ids"])
        ]


def _not_an_image(name: str, kind: str) -> InvalidImageError:
    """A ``data:`` URL of another type given to a model that reads images: meant as a file, which
    this model cannot read (a PDF's pages are images to render first), rather than a text."""
    what = "with no media type" if kind == "untyped" else f"of type {kind}"
    advice = "send images as data:image/...;base64,... and a PDF's pages rendered as images"
    return InvalidImageError(name, f"a data URL {what} is not an image ({advice})")
