"""Cutting a long text before tokenising it never changes what the model gets (issue 27, item 1).

For WordPiece (BERT), byte-level BPE and SentencePiece-style Unigram tokenizers, the input
processor's ids for a truncated text, or a truncated pair, equal those of tokenising the whole text
and then truncating; over-long texts without truncation are refused with the whole text's count.
"""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from poolrag.errors import InputTooLongError
from poolrag.request import ResolvedParams
from poolrag.testing.fork_while_held import in_fork_while_held
from poolrag.tokenization import text_cut
from poolrag.tokenization.input_processor import InputProcessor, PromptSettings
from poolrag.tokenization.text_cut import COUNT_WINDOW_CHARS, TextCut, text_cut_of

CORPUS = [
    "The quick brown fox jumps over the lazy dog, naïvely.",
    "Ünïcödé wörds: 日本語のテキスト, emoji 🙂 and numbers 12345 6789.",
    'don\'t stop: x.y.z -- (brackets) [more] {and} "quotes"',
] * 20
WORDS = [
    "word",
    "naïve",
    "日本語",
    "🙂🙂",
    "x" * 150,
    "déjà-vu",
    "12,345",
    "a.b.c",
    "ßtraße",
    "Σίσυφος",
    "\u200b",
]
SEPARATORS = [" ", "  ", "\n", "\t", " \u00a0 ", ". ", ", ", ""]

text_strategy = st.lists(
    st.one_of(
        st.sampled_from(WORDS),
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12),
        st.text(alphabet="abcdé", min_size=60, max_size=400),  # a long word: many pieces or one [UNK]
        # Chinese and Japanese without spaces: ideographs beside kana, Latin, accents and punctuation
        st.text(alphabet="中文字漢日本語の々アカ、。a\u0301\uf900\U00020000", min_size=1, max_size=300),
    ),
    min_size=1,
    max_size=60,
).flatmap(
    lambda words: st.lists(st.sampled_from(SEPARATORS), min_size=len(words), max_size=len(words)).map(
        lambda seps: "x" + "".join(w + s for w, s in zip(words, seps, strict=True))
    )
)


def _save(tokenizer: Tokenizer, folder: Path, **special: str) -> PreTrainedTokenizerBase:
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special).save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def _byte_level_bpe(folder: Path) -> PreTrainedTokenizerBase:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return _save(tokenizer, folder, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def _unigram_metaspace(folder: Path) -> PreTrainedTokenizerBase:
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("  ", " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=200, special_tokens=["<unk>", "<pad>"], unk_token="<unk>")
    tokenizer.train_from_iterator(CORPUS, trainer)
    return _save(tokenizer, folder, unk_token="<unk>", pad_token="<pad>")


def _bpe_without_pre_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<pad>"])
    tokenizer.train_from_iterator(CORPUS, trainer)
    return _save(tokenizer, folder, unk_token="<unk>", pad_token="<pad>")


@pytest.fixture(scope="module", params=["wordpiece", "byte-level-bpe", "unigram-metaspace"])
def tokenizer(request: pytest.FixtureRequest, minilm_path: Path, tmp_path_factory) -> PreTrainedTokenizerBase:
    if request.param == "wordpiece":
        return AutoTokenizer.from_pretrained(minilm_path)
    folder = tmp_path_factory.mktemp(request.param)
    return _byte_level_bpe(folder) if request.param == "byte-level-bpe" else _unigram_metaspace(folder)


def _processor(tokenizer: PreTrainedTokenizerBase, max_len: int) -> InputProcessor:
    return InputProcessor(tokenizer, max_len, PromptSettings({}))


EMBED = ResolvedParams(task="embed")


def test_every_tokenizer_here_is_cut(tokenizer: PreTrainedTokenizerBase) -> None:
    assert TextCut(tokenizer).enabled  # else the properties below would hold trivially


def test_a_tokenizers_remembered_cut_lets_it_go(minilm_path: Path) -> None:
    """The cut kept per tokenizer must not keep the tokenizer: an engine made and dropped again and
    again (a notebook cell re-run) left every tokenizer it loaded alive."""
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    assert text_cut_of(tokenizer).prefix("one two three " * 100, 3).startswith("one two three")
    gone = weakref.ref(tokenizer)
    del tokenizer
    gc.collect()
    assert gone() is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy, limit=st.integers(min_value=3, max_value=40))
def test_a_cut_text_tokenises_as_the_whole_text_truncated(
    tokenizer: PreTrainedTokenizerBase, text: str, limit: int
) -> None:
    processor = _processor(tokenizer, max_len=limit)
    [request] = processor.texts([text], EMBED, truncate=-1, prompt=None)
    whole = tokenizer(text, truncation=True, max_length=limit)["input_ids"]
    assert list(request.token_ids) == whole


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=text_strategy, second=text_strategy, limit=st.integers(min_value=8, max_value=40))
def test_a_cut_pair_tokenises_as_the_whole_pair_truncated(
    tokenizer: PreTrainedTokenizerBase, first: str, second: str, limit: int
) -> None:
    processor = _processor(tokenizer, max_len=limit)
    [request] = processor.pairs([(first, second)], ResolvedParams(task="score"), truncate=-1)
    whole = tokenizer(first, second, truncation="longest_first", max_length=limit)["input_ids"]
    assert list(request.token_ids) == whole


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=text_strategy,
    documents=st.lists(text_strategy, min_size=2, max_size=4),
    limit=st.integers(min_value=8, max_value=40),
)
def test_a_query_beside_several_documents_tokenises_as_each_whole_pair_truncated(
    tokenizer: PreTrainedTokenizerBase, query: str, documents: list[str], limit: int
) -> None:
    """The query is cut and encoded once for all its documents; each pair is still the
    tokenizer's own pair of the whole texts, truncated."""
    processor = _processor(tokenizer, max_len=limit)
    pairs = InputProcessor.checked_pairs(query, documents)
    requests = processor.pairs(pairs, ResolvedParams(task="score"), truncate=-1)
    whole = tokenizer([query] * len(documents), documents, truncation="longest_first", max_length=limit)
    assert [list(request.token_ids) for request in requests] == whole["input_ids"]


@pytest.mark.parametrize("lengths", [(600, 600), (600, 601), (601, 600), (40, 600), (600, 3)])
def test_pairs_of_long_texts_keep_the_longer_ones_extra_token(
    tokenizer: PreTrainedTokenizerBase, lengths: tuple[int, int]
) -> None:
    """``longest_first`` keeps one token more of the longer text: cutting must not swap them. (The
    reference stays short: the tokenizer builds every pair of overflow windows, quadratic.)"""
    first, second = ("word " * lengths[0]).strip(), ("other " * lengths[1]).strip()
    processor = _processor(tokenizer, max_len=21)
    [request] = processor.pairs([(first, second)], ResolvedParams(task="score"), truncate=-1)
    assert (
        list(request.token_ids)
        == tokenizer(first, second, truncation="longest_first", max_length=21)["input_ids"]
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy, tokens=st.integers(min_value=1, max_value=40))
@example(text="x" + "a" * 300 + " ", tokens=1)  # one [UNK] word, then a space the cut dropped: kept whole
def test_first_ends_a_text_where_its_nth_token_ends(
    tokenizer: PreTrainedTokenizerBase, text: str, tokens: int
) -> None:
    """Cohere's ``max_tokens_per_doc``: a document through its first n tokens, as the whole text's
    own offsets place them (special tokens not counted)."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    expected = text if len(offsets) <= tokens else text[: offsets[tokens - 1][1]]
    assert TextCut(tokenizer).first(text, tokens) == expected


def test_first_of_a_huge_text_tokenises_only_its_head(tokenizer: PreTrainedTokenizerBase) -> None:
    text = "naïve words " * 1_000_000  # 12 MB: tokenised whole, this takes seconds and gigabytes
    head = TextCut(tokenizer).first(text, 5)
    assert text.startswith(head) and len(tokenizer(head, add_special_tokens=False)["input_ids"]) == 5


def test_a_huge_text_is_cut_to_a_few_thousand_characters(tokenizer: PreTrainedTokenizerBase) -> None:
    text = "word " * 3_145_728  # the 15.7 MB request of issue 27
    head = TextCut(tokenizer).prefix(text, 256)
    assert 256 * 4 <= len(head) <= 256 * 5 * 32 and text.startswith(head)


def test_text_without_spaces_is_cut_before_an_ideograph_where_the_normaliser_spaces_them(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    """5 M characters of Chinese, a 15 MB request, were tokenised whole (~50 s on 2 cores, holding
    the tokenizer's lock) because a cut waited for a space; BERT's normaliser puts spaces around
    every ideograph, so a cut before one is as exact. The other tokenizers here join ideographs
    into longer pieces, so they keep such a text whole."""
    text = "中文文本，没有空格。" * 500_000
    head = TextCut(tokenizer).prefix(text, 256)
    normalizer = tokenizer.backend_tokenizer.normalizer
    if normalizer is not None and normalizer.normalize_str("a中b") == "a 中 b":
        assert text.startswith(head) and len(head) <= 256 * 2 * 32
        assert (
            tokenizer(head, truncation=True, max_length=256)["input_ids"]
            == (tokenizer(text[:20_000], truncation=True, max_length=256)["input_ids"])
        )
    else:
        assert head == text


def test_over_long_text_without_truncation_is_refused_with_its_whole_count(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    text = ("naïve 日本語 word, " * 20_000).strip()  # several count windows
    assert len(text) > 3 * COUNT_WINDOW_CHARS
    whole = len(tokenizer(text)["input_ids"])
    with pytest.raises(InputTooLongError) as refused:
        _processor(tokenizer, max_len=64).texts([text], EMBED, truncate=None, prompt=None)
    assert refused.value.args == InputTooLongError(whole, 64, "input", 0).args
    assert TextCut(tokenizer).count(text) == len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_a_tokenizer_without_pre_tokenizer_is_never_cut(tmp_path: Path) -> None:
    tokenizer = _bpe_without_pre_tokenizer(tmp_path)
    cut = TextCut(tokenizer)
    text = "the quick brown fox " * 1000
    assert not cut.enabled and cut.prefix(text, 8) == text
    [request] = _processor(tokenizer, max_len=8).texts([text], EMBED, truncate=-1, prompt=None)
    assert list(request.token_ids) == tokenizer(text, truncation=True, max_length=8)["input_ids"]


def test_a_tokenizer_saved_to_truncate_on_the_left_keeps_the_first_tokens_and_says_so(
    tokenizer: PreTrainedTokenizerBase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """poolrag keeps a long input's first tokens on every route; a folder saved with
    ``truncation_side="left"`` got a window from the text's middle (its start cut before
    tokenising, its end cut by the tokenizer). It is the first tokens, with a warning naming the
    difference from sentence-transformers."""
    tokenizer.save_pretrained(tmp_path)
    left = AutoTokenizer.from_pretrained(tmp_path, truncation_side="left")
    right = AutoTokenizer.from_pretrained(tmp_path)
    processor = _processor(left, max_len=24)
    assert "truncation_side='left'" in caplog.text
    text = " ".join(CORPUS)
    [request] = processor.texts([text], EMBED, truncate=-1, prompt=None)
    assert list(request.token_ids) == right(text, truncation=True, max_length=24)["input_ids"]
    [pair] = processor.pairs([("a short query", text)], ResolvedParams(task="score"), truncate=-1)
    assert list(pair.token_ids) == right("a short query", text, truncation=True, max_length=24)["input_ids"]


def _cut_in_child(folder: str) -> str:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return text_cut_of(tokenizer).prefix("a cat " * 1000, 8)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_worker_forked_while_a_thread_built_a_cut_builds_its_own(minilm_path: Path) -> None:
    """A thread of the parent building a tokenizer's cut at the fork (each model's first long text)
    does not exist in the child, whose first cut of its own waited for it forever; the fork waits."""
    got = in_fork_while_held(text_cut._CUTS_LOCK, _cut_in_child, str(minilm_path), timeout=60)
    assert got == _cut_in_child(str(minilm_path))
