"""The sparse_embed task: SPLADE against sentence-transformers' SparseEncoder, BGE-M3's three heads
against a hand computation of FlagEmbedding's formulas, and all three BGE-M3 vectors from one pass."""

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
from poolrag.errors import InvalidInputError, ModelLoadError, UnsupportedTaskError
from poolrag.outputs import SPARSE_ENTRY
from poolrag.sparse import SparseVector
from poolrag.testing.tiny_models import SENTENCES, build_bge_m3, build_splade

TEXTS = [*SENTENCES, "Part number XK-4471 fits the 2019 model only."]
UNIQUE = list(dict.fromkeys(TEXTS))


def _dense(vector: SparseVector, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.float32)
    out[vector.indices] = vector.values
    return out


# -- SPLADE ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def splade_folders(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Callable[..., Path]:
    built: dict[tuple[str, str, bool], Path] = {}

    def make(strategy: str = "max", activation: str = "relu", legacy: bool = False) -> Path:
        key = (strategy, activation, legacy)
        if key not in built:
            dest = tmp_path_factory.mktemp(f"splade-{strategy}-{activation}-{legacy}")
            built[key] = build_splade(dest, minilm_path, strategy, activation, legacy_module=legacy)
        return built[key]

    return make


def _sentence_transformers(folder: Path, texts: list[str], **kwargs: object) -> np.ndarray:
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(str(folder), device="cpu")
    return encoder.encode(texts, convert_to_tensor=True, **kwargs).to_dense().numpy()


@pytest.mark.parametrize(
    ("strategy", "activation", "legacy"),
    [("max", "relu", False), ("sum", "relu", False), ("max", "log1p_relu", False), ("max", "relu", True)],
)
def test_splade_matches_sentence_transformers(
    splade_folders: Callable[..., Path], strategy: str, activation: str, legacy: bool
) -> None:
    folder = splade_folders(strategy, activation, legacy)
    reference = _sentence_transformers(folder, TEXTS)
    engine = Engine(folder)
    assert engine.supported_tasks == ("sparse_embed",)
    vectors = engine.sparse_embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector, expected in zip(vectors, reference, strict=True):
        assert isinstance(vector, SparseVector)
        np.testing.assert_array_equal(vector.indices, np.flatnonzero(expected))
        np.testing.assert_allclose(_dense(vector, expected.size), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("strategy", ["max", "sum"])
def test_splade_batches_larger_than_one_logits_chunk(
    splade_folders: Callable[..., Path], strategy: str
) -> None:
    """A forward batch of more tokens than the pooler holds vocabulary logits for (2**26 floats:
    2,199 tokens over this 30,522-word vocabulary) is pooled in several chunks, exactly the same."""
    folder = splade_folders(strategy)
    texts = [f"item {i}: {SENTENCES[3]}" for i in range(120)]
    engine = Engine(folder, max_batch_tokens=8192)
    assert sum(len(engine.tokenize(t)) for t in texts) > 2 * 2199
    before = engine.core_stats.batches
    vectors = engine.sparse_embed(texts)
    assert engine.core_stats.batches - before < 3  # so some batch spans more than one chunk
    for vector, expected in zip(vectors, _sentence_transformers(folder, texts), strict=True):
        np.testing.assert_array_equal(vector.indices, np.flatnonzero(expected))
        np.testing.assert_allclose(_dense(vector, expected.size), expected, atol=1e-5, rtol=1e-5)


def test_splade_max_active_dims_matches_sentence_transformers(splade_folders: Callable[..., Path]) -> None:
    folder = splade_folders()
    reference = _sentence_transformers(folder, UNIQUE, max_active_dims=7)
    vectors = Engine(folder).sparse_embed(UNIQUE, PoolingParams(max_active_dims=7))
    for vector, expected in zip(vectors, reference, strict=True):
        assert len(vector) == 7
        np.testing.assert_array_equal(vector.indices, np.flatnonzero(expected))
        np.testing.assert_allclose(_dense(vector, expected.size), expected, atol=1e-5, rtol=1e-5)


def test_encode_and_async_agree_with_sparse_embed(splade_folders: Callable[..., Path]) -> None:
    engine = Engine(splade_folders())
    vectors = engine.sparse_embed(TEXTS)
    encoded = engine.encode(TEXTS, pooling_task="sparse_embed")
    arrays = engine.encode_arrays(TEXTS, "sparse_embed")
    for vector, out, array in zip(vectors, encoded, arrays, strict=True):
        assert out.outputs.data.dtype == SPARSE_ENTRY and array.dtype == SPARSE_ENTRY
        np.testing.assert_array_equal(out.outputs.data["index"], vector.indices)
        np.testing.assert_array_equal(out.outputs.data["value"], vector.values)
        assert out.num_tokens > 0
    assert asyncio.run(engine.asparse_embed(TEXTS)) == vectors
    assert engine.sparse_embed("Hi") == [vectors[1]]
    assert engine.sparse_embed([]) == []


def test_a_plain_masked_lm_pools_splade_when_the_pooler_config_says_so(
    splade_folders: Callable[..., Path], tmp_path: Path
) -> None:
    folder = splade_folders()
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folder / name, plain / name)
    with pytest.raises(UnsupportedTaskError):  # without it, the folder is an embedder
        Engine(plain).sparse_embed(["Hi"])
    engine = Engine(plain, pooler_config={"pooling_type": "SPLADE"})
    assert engine.supported_tasks == ("sparse_embed",)
    assert engine.sparse_embed(TEXTS) == Engine(folder).sparse_embed(TEXTS)


def test_splade_pooling_needs_a_masked_lm_head(tiny_model: Callable[..., Path]) -> None:
    with pytest.raises(ModelLoadError, match="ForMaskedLM"):
        Engine(tiny_model("bert"), pooler_config={"pooling_type": "SPLADE"})


def test_sparse_parameters_are_checked(splade_folders: Callable[..., Path], minilm_engine: Engine) -> None:
    engine = Engine(splade_folders())
    with pytest.raises(UnsupportedTaskError, match="sparse_embed"):
        engine.embed(["Hi"])
    with pytest.raises(UnsupportedTaskError, match="embed, score, token_embed"):
        minilm_engine.sparse_embed(["Hi"])
    with pytest.raises(InvalidInputError, match="max_active_dims"):
        PoolingParams(max_active_dims=0)
    with pytest.raises(InvalidInputError, match="max_active_dims applies to sparse_embed"):
        minilm_engine.embed(["Hi"], PoolingParams(max_active_dims=3))
    with pytest.raises(InvalidInputError, match="dimensions"):
        engine.sparse_embed(["Hi"], PoolingParams(dimensions=8))


# -- BGE-M3 ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def m3_folder(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    return build_bge_m3(tmp_path_factory.mktemp("bge-m3"), minilm_path)


@pytest.fixture(scope="module")
def m3_engine(m3_folder: Path) -> Engine:
    return Engine(m3_folder, max_batch_tokens=4096)


def _linear(path: Path) -> torch.nn.Linear:
    state = torch.load(path, weights_only=True)
    layer = torch.nn.Linear(state["weight"].shape[1], state["weight"].shape[0])
    layer.load_state_dict(state)
    return layer


def _by_hand(folder: Path, text: str) -> tuple[np.ndarray, dict[int, float], np.ndarray]:
    """FlagEmbedding's BGE-M3 heads on transformers' hidden states: dense = normalised CLS; sparse =
    relu(sparse_linear(h)), max per token id, cls/eos/pad/unk and zero weights dropped; colbert =
    colbert_linear(h[1:]), normalised."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    sparse_linear, colbert_linear = (
        _linear(folder / "sparse_linear.pt"),
        _linear(folder / "colbert_linear.pt"),
    )
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        states = model(**encoded).last_hidden_state[0]
        dense = torch.nn.functional.normalize(states[0], dim=-1).numpy()
        weights = torch.relu(sparse_linear(states)).squeeze(-1).numpy()
        colbert = torch.nn.functional.normalize(colbert_linear(states[1:]), dim=-1).numpy()
    unused = {
        tokenizer.convert_tokens_to_ids(tokenizer.special_tokens_map[name])
        for name in ("cls_token", "eos_token", "pad_token", "unk_token")
        if name in tokenizer.special_tokens_map
    }
    sparse: dict[int, float] = {}
    for token, weight in zip(encoded["input_ids"][0].tolist(), weights.tolist(), strict=True):
        if token not in unused and weight > 0 and weight > sparse.get(token, 0.0):
            sparse[token] = weight
    return dense, sparse, colbert


def test_bge_m3_matches_the_published_heads_by_hand(m3_folder: Path, m3_engine: Engine) -> None:
    assert m3_engine.supported_tasks == ("embed", "sparse_embed", "token_embed", "score")
    multi = m3_engine.encode_multi(TEXTS)
    dense = m3_engine.embed_array(TEXTS)
    sparse = m3_engine.sparse_embed(TEXTS)
    colbert = m3_engine.encode_arrays(TEXTS, "token_embed")
    for i, text in enumerate(TEXTS):
        want_dense, want_sparse, want_colbert = _by_hand(m3_folder, text)
        assert want_sparse and len(want_sparse) < len(m3_engine.tokenize(text))  # some weights dropped
        for got_dense, got_sparse, got_colbert in (
            (multi[i].dense, multi[i].sparse, multi[i].colbert),
            (dense[i], sparse[i], colbert[i]),
        ):
            np.testing.assert_allclose(got_dense, want_dense, atol=1e-5)
            assert sorted(got_sparse.to_dict()) == sorted(want_sparse)
            np.testing.assert_allclose(
                got_sparse.values, [want_sparse[t] for t in got_sparse.indices.tolist()], atol=1e-5
            )
            np.testing.assert_allclose(got_colbert, want_colbert, atol=1e-5)


def test_encode_multi_runs_one_forward_pass(m3_engine: Engine) -> None:
    """Each text goes through the model once (the batcher may still cut them into several batches)."""
    stats = m3_engine.core_stats
    before_sequences, before_tokens = stats.sequences, stats.tokens
    m3_engine.encode_multi(UNIQUE)
    assert stats.sequences - before_sequences == len(UNIQUE)
    assert stats.tokens - before_tokens == sum(len(m3_engine.tokenize(t)) for t in UNIQUE)
    # the three single-task calls each run the texts again
    before_sequences = stats.sequences
    m3_engine.embed(UNIQUE)
    m3_engine.sparse_embed(UNIQUE)
    m3_engine.encode(UNIQUE, "token_embed")
    assert stats.sequences - before_sequences == 3 * len(UNIQUE)


def test_encode_multi_async_and_parameters(m3_engine: Engine, minilm_engine: Engine) -> None:
    multi = m3_engine.encode_multi(TEXTS, PoolingParams(max_active_dims=2))
    again = asyncio.run(m3_engine.aencode_multi(TEXTS, PoolingParams(max_active_dims=2)))
    for one, two, full in zip(multi, again, m3_engine.sparse_embed(TEXTS), strict=True):
        assert one.sparse == two.sparse and len(one.sparse) <= 2
        np.testing.assert_array_equal(one.dense, two.dense)
        np.testing.assert_array_equal(one.colbert, two.colbert)
        # the two largest weights of the full vector
        top = sorted(full.to_dict().items(), key=lambda kv: -kv[1])[:2]
        assert one.sparse.to_dict() == pytest.approx(dict(top))
    assert m3_engine.encode_multi([]) == []
    with pytest.raises(UnsupportedTaskError, match="encode_multi"):
        minilm_engine.encode_multi(["Hi"])


def test_bge_m3_heads_are_loaded_without_unpickling_code(m3_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "m3"
    shutil.copytree(m3_folder, folder)
    state = torch.load(folder / "sparse_linear.pt", weights_only=True)
    torch.save({**state, "note": Path("not a tensor")}, folder / "sparse_linear.pt")
    with pytest.raises(ModelLoadError, match="refusing to load"):
        Engine(folder)


def test_the_vllm_front_door_encodes_sparse(splade_folders: Callable[..., Path]) -> None:
    from poolrag import LLM

    llm = LLM(str(splade_folders()))
    assert llm.supported_tasks == ("sparse_embed",)
    outputs = llm.encode(TEXTS, pooling_task="sparse_embed", truncate_prompt_tokens=4)
    expected = llm.engine.sparse_embed(TEXTS, PoolingParams(truncate_prompt_tokens=4))
    for out, vector in zip(outputs, expected, strict=True):
        assert out.num_tokens <= 4
        assert SparseVector(out.outputs.data["index"], out.outputs.data["value"]) == vector
