"""Work avoided in the last layer: CLS-pooled embedders and sequence classifiers compute only each
sequence's first row past the last layer's attention, with the same numbers as the full layer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from poolrag import Engine
from poolrag.config.network_head import NetworkHead
from poolrag.models.bert import BertFamilyModel
from poolrag.pooling.methods import CLSPool
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.runner.model_runner import ModelRunner
from poolrag.testing import engine_internals as internals

EMBED = ResolvedParams(task="embed")
TOKENS = ResolvedParams(task="token_embed")


def _batch(name: str, params: ResolvedParams) -> list[PoolingRequest]:
    if name == "many_lengths":  # 12 distinct lengths, too few rows each for one SDPA call per run
        ids = [tuple(100 + (7 * i + n) % 900 for i in range(n)) for n in range(2, 26, 2)]
    elif name == "equal":
        ids = [tuple(200 + (3 * i + n) % 700 for i in range(9)) for n in range(5)]
    else:
        ids = [(101, 2023, 2003), (101, 7592), (101, 2023, 2003, 1037, 2936, 6251, 102), (101, 102)]
    return [PoolingRequest(tuple(t), params) for t in ids]


def _cls_runner(tiny_model: Callable[..., Path], arch: str) -> ModelRunner:
    engine = Engine(tiny_model(arch), model_impl="native", pooler_config={"pooling_type": "CLS"})
    runner = internals.runner(engine)
    assert isinstance(runner.model, BertFamilyModel)
    runner.prepare_for_serving()  # the oneDNN-packed weights the engine serves with
    # the argument the pipeline passes for CLS-pooled embedders
    return ModelRunner(
        runner.model, runner.head, runner.pad_token_id, runner.device, first_row_tasks=frozenset({"embed"})
    )


@pytest.mark.parametrize("batch_name", ["mixed", "many_lengths", "equal"])
@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_cls_rows_equal_the_full_last_layer(
    tiny_model: Callable[..., Path], arch: str, batch_name: str
) -> None:
    runner = _cls_runner(tiny_model, arch)
    batch = _batch(batch_name, EMBED)
    inputs = runner.prepare(batch)
    assert inputs.first_rows_only
    short = runner.run_prepared(batch, inputs).tokens
    assert short is not None
    assert short.states.shape == (len(batch), runner.model.config.hidden_size)
    assert short.lengths.tolist() == [1] * len(batch)
    assert short.token_ids.tolist() == [r.token_ids[0] for r in batch]

    runner.first_row_tasks = frozenset()
    full = runner.forward(batch).tokens
    assert full is not None and full.lengths.tolist() == [r.num_tokens for r in batch]
    torch.testing.assert_close(CLSPool()(short), CLSPool()(full), rtol=0, atol=1e-6)


def test_token_tasks_keep_every_row(tiny_model: Callable[..., Path]) -> None:
    """A batch that needs every row (token_embed, or any task not listed) runs the full last layer."""
    runner = _cls_runner(tiny_model, "bert")
    batch = _batch("mixed", TOKENS)
    assert not runner.prepare(batch).first_rows_only
    out = runner.forward(batch).tokens
    assert out is not None and out.states.shape[0] == sum(r.num_tokens for r in batch)
    mixed = _batch("mixed", EMBED)[:2] + batch[2:]
    assert not runner.prepare(mixed).first_rows_only


def test_cls_engine_vectors_unchanged(tiny_model: Callable[..., Path]) -> None:
    engine = Engine(tiny_model("bert"), model_impl="native", pooler_config={"pooling_type": "CLS"})
    runner = internals.runner(engine)
    texts = ["a short one", "a somewhat longer sentence about pooling and rows", "x", "more words here"]
    full = engine.embed_array(texts)
    runner.first_row_tasks = frozenset({"embed", "score"})
    assert runner.prepare(internals.processor(engine).texts(texts, EMBED, None, None)).first_rows_only
    short = engine.embed_array(texts)
    torch.testing.assert_close(torch.from_numpy(short), torch.from_numpy(full), rtol=0, atol=1e-6)


@pytest.mark.parametrize("batch_name", ["mixed", "many_lengths", "equal"])
@pytest.mark.parametrize("arch", ["bert", "xlm-roberta"])
def test_classifier_first_rows_equal_full_last_layer(
    tiny_model: Callable[..., Path], arch: str, batch_name: str
) -> None:
    engine = Engine(tiny_model(arch, "sequence", num_labels=3), model_impl="native")
    runner = internals.runner(engine)
    model = runner.model
    assert isinstance(model, BertFamilyModel) and model.head_kind is NetworkHead.SEQUENCE
    runner.prepare_for_serving()
    batch = _batch(batch_name, ResolvedParams(task="classify"))
    assert model.classifier_first_rows
    short = runner.forward(batch).sequences
    model.classifier_first_rows = False
    full = runner.forward(batch).sequences
    assert short is not None and full is not None and short.shape == (len(batch), 3)
    torch.testing.assert_close(short, full, rtol=0, atol=1e-6)
