"""Issue 30, item 6: "encoder `*ForSequenceClassification` never offers `token_classify` even with
`convert="classify"`". With it, vLLM's table offers the classifier's head on every token; without
it nothing changes, and a family whose head poolrag cannot apply per token is refused at load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from poolrag import Engine, PoolingParams
from poolrag.errors import InvalidInputError, ModelLoadError
from poolrag.request import ResolvedParams
from poolrag.runner.forward_output import ForwardOutput
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import ENCODER_ARCHS, SENTENCES, copy_tokenizer


def _head_per_token(model: torch.nn.Module, arch: str, hidden: torch.Tensor) -> torch.Tensor:
    """The family's head layers (those transformers applies after its pooled output) on each row."""
    if arch in ("bert", "modernbert"):
        return model.classifier(hidden)
    if arch == "distilbert":
        return model.classifier(torch.relu(model.pre_classifier(hidden)))
    head = model.classifier  # RobertaClassificationHead / MPNetClassificationHead
    return head.out_proj(torch.tanh(head.dense(hidden)))


def _reference(folder: Path, arch: str, texts: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-token logits and sequence logits from transformers, one unpadded text at a time."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokens, sequences = [], []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, return_tensors="pt")
            enc = {
                k: v
                for k, v in enc.items()
                if k != "token_type_ids" or "token_type_ids" in tokenizer.model_input_names
            }
            hidden = model.base_model(**enc).last_hidden_state[0]
            tokens.append(_head_per_token(model, arch, hidden).numpy())
            sequences.append(model(**enc).logits[0].numpy())
    return tokens, sequences


@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_token_classify_is_the_classifier_head_on_every_token(
    tiny_model: Callable[..., Path], arch: str
) -> None:
    folder = tiny_model(arch, head="sequence", num_labels=3)
    engine = Engine(folder, convert="classify")
    assert engine.supported_tasks == ("classify", "token_classify")
    per_token, sequence = _reference(folder, arch, SENTENCES)

    raw = engine.token_classify(SENTENCES, PoolingParams(use_activation=False))
    for out, ref in zip(raw, per_token, strict=True):
        assert out.outputs.data.shape == (out.num_tokens, 3)
        np.testing.assert_allclose(out.outputs.data, ref, atol=1e-5)
    probs = engine.token_classify(SENTENCES)
    for out, ref in zip(probs, per_token, strict=True):  # the classifier's activation: softmax
        np.testing.assert_allclose(out.outputs.data, torch.softmax(torch.from_numpy(ref), -1), atol=1e-5)
    # the sequence task is untouched by the conversion
    logits = engine.classify(SENTENCES, PoolingParams(use_activation=False))
    for out, ref in zip(logits, sequence, strict=True):
        np.testing.assert_allclose(out.outputs.probs, ref, atol=1e-5)


@pytest.mark.parametrize("arch", ["roberta", "mpnet"])
def test_a_first_token_head_on_the_first_token_is_the_sequence_logit(
    tiny_model: Callable[..., Path], arch: str
) -> None:
    """RoBERTa's and MPNet's heads read [CLS] alone, so their first row is ``classify``'s logits."""
    engine = Engine(tiny_model(arch, head="sequence", num_labels=3), convert="classify")
    raw = PoolingParams(use_activation=False)
    rows = engine.token_classify(SENTENCES, raw)
    sequences = engine.classify(SENTENCES, raw)
    for row, seq in zip(rows, sequences, strict=True):
        np.testing.assert_allclose(row.outputs.data[0], seq.outputs.probs, atol=1e-5)


def test_without_convert_a_sequence_classifier_offers_no_token_classify(
    tiny_model: Callable[..., Path],
) -> None:
    engine = Engine(tiny_model("bert", head="sequence", num_labels=3))
    assert engine.supported_tasks == ("classify",)
    assert not internals.runner(engine).token_states
    with pytest.raises(
        InvalidInputError, match=r"load it with convert='classify' to run its head on every token"
    ):
        engine.token_classify(["a b c"])


def test_a_family_without_a_per_token_head_is_refused_at_load(minilm_path: Path, tmp_path: Path) -> None:
    config = transformers.ElectraConfig(
        vocab_size=30522,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=2,
    )
    transformers.ElectraForSequenceClassification(config).save_pretrained(tmp_path)
    copy_tokenizer(minilm_path, tmp_path)
    assert "classify" in Engine(tmp_path).supported_tasks  # as it is, it still loads
    with pytest.raises(ModelLoadError, match="no per-token head for model_type 'electra'") as err:
        Engine(tmp_path, convert="classify")
    assert "\n" not in str(err.value)


def test_the_native_encoder_cannot_serve_token_classify(tiny_model: Callable[..., Path]) -> None:
    folder = tiny_model("bert", head="sequence", num_labels=3)
    with pytest.raises(ModelLoadError, match="token_classify"):
        Engine(folder, convert="classify", model_impl="native")
    assert not getattr(internals.loaded_module(Engine(folder, convert="classify")), "native", False)


def test_a_split_batch_keeps_logits_and_token_rows_together(tiny_model: Callable[..., Path]) -> None:
    """Running out of memory halves the batch: both outputs must be joined back in order."""
    engine = Engine(tiny_model("roberta", head="sequence", num_labels=3), convert="classify")
    runner = internals.runner(engine)
    batch = internals.processor(engine).texts(SENTENCES, ResolvedParams(task="token_classify"), None, None)
    whole = runner.forward(batch)
    halves = [runner.forward(batch[:2]), runner.forward(batch[2:])]
    joined = ForwardOutput.concat(halves)
    assert whole.sequences is not None and joined.sequences is not None
    assert whole.tokens is not None and joined.tokens is not None
    torch.testing.assert_close(joined.sequences, whole.sequences, rtol=0, atol=1e-5)
    torch.testing.assert_close(joined.tokens.states, whole.tokens.states, rtol=0, atol=1e-5)
    assert joined.tokens.lengths.tolist() == whole.tokens.lengths.tolist()
