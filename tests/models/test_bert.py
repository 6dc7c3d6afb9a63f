"""poolrag's native BERT / RoBERTa / XLM-RoBERTa equal transformers' modules.

Each architecture and head is run by both implementations on the same checkpoint, in the packed
layout the engine uses and in the padded layout (with a ColBERT-style attention mask), with the
oneDNN-fused CPU weights and with the plain ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from poolrag import Engine
from poolrag.config.network_head import NetworkHead
from poolrag.models.bert import BertFamilyModel, convert_checkpoint
from poolrag.models.fused_linear import FusedLinear
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import SENTENCES

PARAMS = ResolvedParams(task="embed")
ARCHS = ("bert", "roberta", "xlm-roberta")


def _requests(engine: Engine) -> list[PoolingRequest]:
    return internals.processor(engine).texts(list(SENTENCES), PARAMS, None, None)


def _assert_same_embeddings(native: Engine, reference: Engine, texts: list[str] = SENTENCES) -> None:
    torch.testing.assert_close(
        torch.from_numpy(native.embed_array(texts)),
        torch.from_numpy(reference.embed_array(texts)),
        rtol=0,
        atol=1e-5,
    )


def _engines(folder: Path) -> tuple[Engine, Engine]:
    return Engine(folder, model_impl="native"), Engine(folder, model_impl="transformers")


@pytest.mark.parametrize("head", [None, "token", "sequence"])
@pytest.mark.parametrize("arch", ARCHS)
def test_native_equals_transformers(tiny_model: Callable[..., Path], arch: str, head: str | None) -> None:
    native, reference = _engines(tiny_model(arch, head, num_labels=3))
    assert isinstance(internals.loaded_module(native), BertFamilyModel)
    assert not isinstance(internals.loaded_module(reference), BertFamilyModel)
    # every row's states are compared here; CLS-only last layers are tests/models/test_first_rows.py's
    internals.runner(native).first_row_tasks = frozenset()
    batch = _requests(native)
    got, want = (
        internals.runner(native).forward(batch),
        internals.runner(reference).forward(batch),
    )
    if head == "sequence":
        assert got.sequences is not None and want.sequences is not None
        assert got.sequences.shape == (len(SENTENCES), 3)
        torch.testing.assert_close(got.sequences, want.sequences, rtol=0, atol=1e-5)
    else:
        assert got.tokens is not None and want.tokens is not None
        assert torch.equal(got.tokens.lengths, want.tokens.lengths)
        torch.testing.assert_close(got.tokens.states, want.tokens.states, rtol=0, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_padded_layout_and_attention_masks_match(tiny_model: Callable[..., Path], arch: str) -> None:
    """A request with its own attention pattern (ColBERT [MASK] expansion) runs padded, masked alike."""
    native, reference = _engines(tiny_model(arch))
    masked = PoolingRequest((101, 2023, 2003, 103, 103, 102), PARAMS, attention=(1, 1, 1, 0, 0, 1))
    batch = [masked, *_requests(native)]
    assert not internals.runner(native).prepare(batch).packed
    got = internals.runner(native).forward(batch).tokens
    want = internals.runner(reference).forward(batch).tokens
    assert got is not None and want is not None
    torch.testing.assert_close(got.states, want.states, rtol=0, atol=1e-5)


@pytest.mark.parametrize("head", [None, "token", "sequence"])
def test_fused_cpu_weights_equal_plain_ones(tiny_model: Callable[..., Path], head: str | None) -> None:
    """The engine packs weights (GELU and residual add inside oneDNN) when serving starts; same numbers."""
    engine = Engine(tiny_model("bert", head), model_impl="native")
    runner = internals.runner(engine)
    batch = _requests(engine)
    plain = runner.forward(batch)
    runner.prepare_for_serving()
    fused_layers = [m for m in runner.model.modules() if isinstance(m, FusedLinear)]
    assert fused_layers and all(m.packed_weight is not None for m in fused_layers)
    fused = runner.forward(batch)
    got = fused.sequences if head == "sequence" else fused.tokens.states  # type: ignore[union-attr]
    want = plain.sequences if head == "sequence" else plain.tokens.states  # type: ignore[union-attr]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_fused_matmuls_see_few_row_counts_whatever_the_text_lengths(tiny_model: Callable[..., Path]) -> None:
    """oneDNN compiles a primitive per row count: a server's one-text batches of 3 to 61 tokens
    reach the packed matmuls as 32 or 64 rows, and each text still gets its own vector."""
    engine = Engine(tiny_model("bert"), model_impl="native")
    reference = Engine(tiny_model("bert"), model_impl="transformers")
    runner = internals.runner(engine)
    runner.prepare_for_serving()
    first = next(m for m in runner.model.modules() if isinstance(m, FusedLinear))
    seen: set[int] = set()
    hook = first.register_forward_hook(lambda _module, args, _out: seen.add(args[0].shape[0]))
    texts = [" ".join(["word"] * n) for n in range(1, 60)]
    try:
        vectors = np.vstack([engine.embed_array([text]) for text in texts])
    finally:
        hook.remove()
    assert seen == {32, 64}
    np.testing.assert_allclose(vectors, reference.embed_array(texts), rtol=0, atol=1e-5)


def test_minilm_runs_native_by_default_and_equals_transformers(minilm_path: Path) -> None:
    native, reference = Engine(minilm_path), Engine(minilm_path, model_impl="transformers")
    assert isinstance(internals.loaded_module(native), BertFamilyModel)
    _assert_same_embeddings(native, reference, list(SENTENCES) * 5)


def test_legacy_layer_norm_names_load(tiny_model: Callable[..., Path], tmp_path: Path) -> None:
    """Old BERT checkpoints call LayerNorm parameters gamma/beta and prefix everything with ``bert.``."""
    source = tiny_model("bert")
    state = load_file(str(source / "model.safetensors"))
    renamed = {
        "bert."
        + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
        for k, v in state.items()
    }
    converted = convert_checkpoint(renamed, NetworkHead.NONE)
    assert converted.keys() == convert_checkpoint(state, NetworkHead.NONE).keys()
    for name in converted:
        assert torch.equal(converted[name], convert_checkpoint(state, NetworkHead.NONE)[name])
    folder = tmp_path / "legacy"
    folder.mkdir()
    for item in source.iterdir():
        if item.name != "model.safetensors":
            (folder / item.name).write_bytes(item.read_bytes())
    save_file(renamed, str(folder / "model.safetensors"))
    _assert_same_embeddings(Engine(folder, model_impl="native"), Engine(source, model_impl="transformers"))


def test_roberta_as_it_ships(tiny_model: Callable[..., Path]) -> None:
    """pad_token_id=1 (positions start at 2), one token type, no token_type_ids from the caller."""
    folder = tiny_model("roberta", "sequence", type_vocab_size=1, pad_token_id=1)
    native, reference = _engines(folder)
    texts = list(SENTENCES)
    got = torch.tensor(np.stack([o.outputs.probs for o in native.classify(texts)]))
    want = torch.tensor(np.stack([o.outputs.probs for o in reference.classify(texts)]))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    model = internals.loaded_module(native)
    ids = torch.tensor([[0, 2023, 232, 2]])
    with torch.inference_mode():
        implicit = model(ids, attention_mask=torch.ones_like(ids)).logits
        explicit = model(
            ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids)
        ).logits
    torch.testing.assert_close(implicit, explicit, rtol=0, atol=0)


def test_an_unused_roberta_pooler_is_ignored_as_transformers_does(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    """Old RoBERTa classifiers still carry ``roberta.pooler``; their head is ``classifier.dense``."""
    source = tiny_model("roberta", "sequence")
    folder = tmp_path / "with-pooler"
    folder.mkdir()
    for item in source.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    state = load_file(str(source / "model.safetensors"))
    state["roberta.pooler.dense.weight"] = torch.randn(32, 32)
    state["roberta.pooler.dense.bias"] = torch.randn(32)
    save_file(state, str(folder / "model.safetensors"))
    native, reference = _engines(folder)
    got = np.stack([o.outputs.probs for o in native.classify(list(SENTENCES))])
    want = np.stack([o.outputs.probs for o in reference.classify(list(SENTENCES))])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_two_tensors_for_one_parameter_are_refused() -> None:
    weight = torch.zeros(2, 32)
    with pytest.raises(ValueError, match=r"two checkpoint tensors map to head\.out\.weight"):
        convert_checkpoint(
            {"classifier.weight": weight, "bert.classifier.weight": weight}, NetworkHead.SEQUENCE
        )


def test_bf16_on_cpu_is_close_to_transformers_bf16(tiny_model: Callable[..., Path]) -> None:
    folder = tiny_model("bert")
    native = Engine(folder, model_impl="native", dtype="bfloat16")
    reference = Engine(folder, model_impl="transformers", dtype="bfloat16")
    got, want = native.embed_array(SENTENCES), reference.embed_array(SENTENCES)
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosine.min() > 0.999


def test_sharded_checkpoints_load(tiny_model: Callable[..., Path]) -> None:
    sharded = tiny_model("bert", shard_size="500KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    _assert_same_embeddings(Engine(sharded, model_impl="native"), Engine(sharded, model_impl="transformers"))
