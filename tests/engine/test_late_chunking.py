"""``Engine.embed_chunks``: late chunking, one forward pass over a document, one vector per span.

The reference is one transformers / sentence-transformers forward over the document's tokens
([CLS] document [SEP]); a chunk's vector is the mean of the rows of the tokens whose characters
overlap its span, then the folder's Dense / Normalize modules, as the model finishes ``embed``.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from poolrag import Engine, PoolingParams
from poolrag.errors import InputTypeError, InvalidInputError
from poolrag.testing.tiny_models import write_sentence_transformers
from poolrag.tokenization.late_chunks import WINDOW_OVERLAP

DOCUMENT = (
    "Late chunking embeds the whole document once. Each chunk then reads its neighbours. "
    "The pooled rows of a span give that chunk's vector. Retrieval stores one vector per chunk."
)


def _spans(text: str) -> list[tuple[int, int]]:
    """One span per sentence (each ending at its full stop)."""
    spans, start = [], 0
    while (stop := text.find(".", start)) != -1:
        spans.append((start, stop + 1))
        start = stop + 2
    return spans


def _rows(offsets: list[tuple[int, int]], start: int, end: int) -> list[int]:
    return [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


@pytest.fixture(scope="module")
def st_folder(tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SentenceTransformer (mean pooling, Dense, Normalize) saved with ``.save()``."""
    folder = tmp_path_factory.mktemp("late-st") / "model"
    shutil.copytree(tiny_model("bert"), folder)
    return write_sentence_transformers(folder, pooling="mean", dense_out=12, normalize=True)


@torch.no_grad()
def test_each_chunk_is_the_mean_of_its_rows_from_one_sentence_transformers_forward(st_folder: Path) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(st_folder), device="cpu")
    tokenizer = st.tokenizer
    encoded = tokenizer(DOCUMENT, return_offsets_mapping=True, return_tensors="pt")
    offsets = [tuple(o) for o in encoded.pop("offset_mapping")[0].tolist()]
    rows = st[0](dict(encoded))["token_embeddings"][0]
    spans = _spans(DOCUMENT)
    pooled = torch.stack([rows[_rows(offsets, s, e)].mean(0) for s, e in spans])
    features = {"sentence_embedding": pooled}
    for module in list(st)[2:]:  # Dense, Normalize
        features = module(features)
    expected = features["sentence_embedding"].numpy()

    engine = Engine(st_folder)
    got = engine.embed_chunks(DOCUMENT, spans)
    assert got.shape == (len(spans), 12) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # the asyncio twin runs the same plan
    np.testing.assert_allclose(asyncio.run(engine.aembed_chunks(DOCUMENT, spans)), got, atol=1e-6)
    # context matters: a chunk embedded with its document differs from the chunk embedded alone
    s, e = spans[1]
    alone = engine.embed_array([DOCUMENT[s:e]])[0]
    assert not np.allclose(alone, got[1], atol=1e-3)


@torch.no_grad()
def test_parity_with_one_automodel_forward_and_params(tiny_model: Callable[..., Path]) -> None:
    folder = tiny_model("bert")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    encoded = tokenizer(DOCUMENT, return_offsets_mapping=True, return_tensors="pt")
    offsets = [tuple(o) for o in encoded.pop("offset_mapping")[0].tolist()]
    hidden = model(**encoded).last_hidden_state[0]
    # overlapping spans are allowed: a chunker with overlap produces them
    spans = [(0, 46), (30, 90), (47, len(DOCUMENT))]
    raw = torch.stack([hidden[_rows(offsets, s, e)].mean(0) for s, e in spans]).numpy()

    engine = Engine(folder, pooler_config={"pooling_type": "MEAN"})
    np.testing.assert_allclose(
        engine.embed_chunks(DOCUMENT, spans, PoolingParams(normalize=False)), raw, rtol=1e-4, atol=1e-5
    )
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    np.testing.assert_allclose(engine.embed_chunks(DOCUMENT, spans), unit, rtol=1e-4, atol=1e-5)
    # Matryoshka sizes cut and renormalise as for embed
    matryoshka = Engine(folder, pooler_config={"pooling_type": "MEAN"}, hf_overrides={"is_matryoshka": True})
    cut = raw[:, :8] / np.linalg.norm(raw[:, :8], axis=1, keepdims=True)
    got = matryoshka.embed_chunks(DOCUMENT, spans, PoolingParams(dimensions=8))
    np.testing.assert_allclose(got, cut, rtol=1e-4, atol=1e-5)


WINDOW = 16  # max_model_len: 14 text tokens between [CLS] and [SEP]
LONG = " ".join(f"Sentence {n} of a long document tells its own small story." for n in range(8))


def _window_reference(folder: Path, spans: list[tuple[int, int]], prompt: str = "") -> np.ndarray:
    """Each span's mean row (all its tokens) from transformers' forward over the window of WINDOW
    tokens where it sits most centrally: [CLS] prompt tokens, the window's document tokens, [SEP].
    A span no fixed window holds whole reads a window centred on it."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    lead_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else []
    encoded = tokenizer(LONG, add_special_tokens=False, return_offsets_mapping=True)
    content, offsets = encoded["input_ids"], encoded["offset_mapping"]
    width = WINDOW - 2 - len(lead_ids)
    stride = width - int(width * WINDOW_OVERLAP)
    starts = [*range(0, len(content) - width, stride), len(content) - width]
    assert len(starts) > 3  # the document needs several windows
    expected = []
    for s, e in spans:
        rows = _rows(offsets, s, e)
        first, stop = rows[0], rows[-1] + 1
        holding = [w for w in starts if w <= first and stop <= w + width]
        holding = holding or [min(max(0, first - (width - (stop - first)) // 2), len(content) - width)]
        w = max(holding, key=lambda w: min(first - w, w + width - stop))
        ids = [tokenizer.cls_token_id, *lead_ids, *content[w : w + width], tokenizer.sep_token_id]
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
        lead = 1 + len(lead_ids)
        expected.append(hidden[lead + first - w : lead + stop - w].mean(0).numpy())
    return np.stack(expected)


@torch.no_grad()
def test_beyond_the_max_length_each_chunk_reads_the_window_where_it_sits_most_centrally(
    tiny_model: Callable[..., Path],
) -> None:
    folder = tiny_model("bert", max_position_embeddings=WINDOW)
    # short spans (a few words each) so every chunk fits a window
    spans = [(s, s + 11) for s, _ in _spans(LONG)]
    engine = Engine(folder, max_model_len=WINDOW, pooler_config={"pooling_type": "MEAN"})
    got = engine.embed_chunks(LONG, spans, PoolingParams(normalize=False))
    np.testing.assert_allclose(got, _window_reference(folder, spans), rtol=1e-4, atol=1e-5)
    # a span longer than a window pools the part inside the window holding most of it
    whole = engine.embed_chunks(LONG, [(0, len(LONG))], PoolingParams(normalize=False))
    assert whole.shape == (1, got.shape[1]) and np.isfinite(whole).all()


@torch.no_grad()
def test_chunks_nearly_a_window_long_pool_all_their_tokens_where_they_straddle_two_windows(
    tiny_model: Callable[..., Path],
) -> None:
    """Consecutive sentence chunks, as ``ingest`` cuts them, most nearly a window long: those that
    straddle two fixed windows used to pool only the part inside one (a third of a chunk's text never
    read by its vector); each is now the mean of all its rows, from a window centred on it."""
    folder = tiny_model("bert", max_position_embeddings=WINDOW)
    spans = _spans(LONG)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    offsets = tokenizer(LONG, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    width = WINDOW - 2
    stride = width - int(width * WINDOW_OVERLAP)
    straddling = 0
    for s, e in spans:
        rows = _rows(offsets, s, e)
        assert len(rows) <= width  # every chunk fits a window
        first, stop = rows[0], rows[-1] + 1
        starts = [*range(0, len(offsets) - width, stride), len(offsets) - width]
        straddling += not any(w <= first and stop <= w + width for w in starts)
    assert straddling >= 2  # the case this test is about
    engine = Engine(folder, max_model_len=WINDOW, pooler_config={"pooling_type": "MEAN"})
    got = engine.embed_chunks(LONG, spans, PoolingParams(normalize=False))
    np.testing.assert_allclose(got, _window_reference(folder, spans), rtol=1e-4, atol=1e-5)


def test_a_chunks_vector_does_not_depend_on_the_spans_sent_with_it(tiny_model: Callable[..., Path]) -> None:
    """Overlapping chunks that straddle fixed windows: one used to read the centred window made for
    another, so its vector changed with the spans of the call (an ingest batch's cut, the cache's
    hits): the cache then answered with a vector a fresh run would not give."""
    folder = tiny_model("bert", max_position_embeddings=WINDOW)
    engine = Engine(folder, max_model_len=WINDOW, pooler_config={"pooling_type": "MEAN"})
    spans = [(s, s + 30) for s in range(0, len(LONG) - 30, 9)]
    together = engine.embed_chunks(LONG, spans, PoolingParams(normalize=False))
    alone = np.stack([engine.embed_chunks(LONG, [span], PoolingParams(normalize=False))[0] for span in spans])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)


@torch.no_grad()
def test_a_document_prompt_opens_every_window_as_it_opens_every_chunk_embedded_alone(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    folder = tmp_path / "prompted"
    shutil.copytree(tiny_model("bert", max_position_embeddings=WINDOW), folder)
    write_sentence_transformers(folder, prompts={"document": "passage: "}, max_seq_length=WINDOW)
    spans = [(s, s + 7) for s, _ in _spans(LONG)]
    expected = _window_reference(folder, spans, prompt="passage: ")
    assert len({tuple(e) for e in expected}) == len(spans)
    engine = Engine(folder, max_model_len=WINDOW)
    got = engine.embed_chunks(LONG, spans, PoolingParams(normalize=False, input_type="document"))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def byte_level_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BERT encoder under a byte-level BPE tokenizer (ModernBERT's and GPT's kind: ``Ġword``
    tokens whose offsets take in the space before the word), saved as transformers saves it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["[CLS]", "[SEP]", "[PAD]"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator([f"search_document: {BYTE_LEVEL_DOCUMENT}"] * 50, trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    folder = tmp_path_factory.mktemp("byte-level") / "model"
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]"
    )
    fast.save_pretrained(folder)
    config = transformers.BertConfig(
        vocab_size=len(fast), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, pad_token_id=fast.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BertModel(config).eval().save_pretrained(folder)
    return folder


BYTE_LEVEL_DOCUMENT = "Berlin is big. It has many museums."


@torch.no_grad()
def test_a_byte_level_tokens_folded_in_space_belongs_to_its_word_not_to_the_text_before(
    byte_level_folder: Path,
) -> None:
    """``ĠBerlin`` after the prompt ``search_document: `` starts on the prompt's last space: it was
    taken for a prompt token, so the first chunk lost its first word (0.07 off) and a chunk of that
    word alone was refused as covering no token; ``ĠIt`` after a span ending in a space was pooled
    into both spans. Each token is its word's: rows by token, from one transformers forward."""
    prompt = "search_document: "
    tokenizer = transformers.AutoTokenizer.from_pretrained(byte_level_folder)
    encoded = tokenizer(prompt + BYTE_LEVEL_DOCUMENT, return_tensors="pt")
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    first, it, last = tokens.index("ĠBerlin"), tokens.index("ĠIt"), len(tokens) - 1  # [SEP] is last
    model = transformers.AutoModel.from_pretrained(byte_level_folder).eval()
    hidden = model(**encoded).last_hidden_state[0]
    expected = torch.stack([hidden[first:it].mean(0), hidden[it:last].mean(0), hidden[first]]).numpy()

    engine = Engine(byte_level_folder, pooler_config={"pooling_type": "MEAN"})
    spans = [(0, 15), (15, len(BYTE_LEVEL_DOCUMENT)), (0, 6)]  # "Berlin is big. ", "It has ...", "Berlin"
    got = engine.embed_chunks(BYTE_LEVEL_DOCUMENT, spans, PoolingParams(prompt=prompt, normalize=False))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("spans", "error", "message"),
    [
        ([(0, 10_000)], InvalidInputError, "spans[0] = [0, 10000] is outside the document"),
        ([(0, 5), (-1, 4)], InvalidInputError, "spans[1] = [-1, 4] is outside the document"),
        ([(7, 7)], InvalidInputError, "spans[0] = [7, 7] is empty"),
        ([(9, 3)], InvalidInputError, "spans[0] = [9, 3] is empty (start must be below end)"),
        ([], InvalidInputError, "spans is empty"),
        ([(0, 2, 3)], InputTypeError, "spans[0] must be a [start, end] pair"),
        ([("0", 3)], InputTypeError, "spans[0] must be a [start, end] pair"),
        ("0-3", InputTypeError, "spans must be a list"),
        ([(45, 47)], InvalidInputError, "spans[0] = [45, 47] covers no token"),
    ],
)
def test_bad_spans_are_one_line_errors_naming_the_span(
    tiny_model: Callable[..., Path], spans: object, error: type[Exception], message: str
) -> None:
    engine = Engine(tiny_model("bert"), pooler_config={"pooling_type": "MEAN"})
    text = "Late chunking embeds the whole document once.   Then chunks."
    with pytest.raises(error) as caught:
        engine.embed_chunks(text, spans)  # type: ignore[arg-type]
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_model_that_does_not_mean_pool_is_refused_naming_its_pooling(
    tiny_model: Callable[..., Path],
) -> None:
    engine = Engine(tiny_model("bert"), pooler_config={"pooling_type": "CLS"})
    assert not engine.supports_late_chunking
    with pytest.raises(InvalidInputError, match="pools by CLS"):
        engine.embed_chunks(DOCUMENT, [(0, 10)])


def test_whether_a_model_late_chunks_follows_its_resolved_pooling_not_its_folder(
    tiny_model: Callable[..., Path],
) -> None:
    """A bare encoder pools by CLS; overridden to MEAN it can late-chunk, and every door (the CLI's
    --late-chunking included) asks ``supports_late_chunking`` rather than deciding again."""
    assert not Engine(tiny_model("bert")).supports_late_chunking
    engine = Engine(tiny_model("bert"), pooler_config={"pooling_type": "MEAN"})
    assert engine.supports_late_chunking
    assert engine.embed_chunks(DOCUMENT, [(0, 10), (11, 30)]).shape[0] == 2
