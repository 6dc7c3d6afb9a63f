"""Issue 30, item 5, "Families": "`T5EncoderModel` (sentence-T5, GTR) is accepted at load, then every
call fails (`You must specify exactly one of input_ids or inputs_embeds`; HTTP 500): the full T5
with its decoder is loaded. `BartModel` silently embeds the decoder's first position. A config
whose `architectures` contradicts its `model_type` runs without a word."

T5-family embedders run their encoder alone (as sentence-transformers does); other encoder-decoders
are refused at load; a self-contradicting config.json is refused at load.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from poolrag import Engine
from poolrag.errors import ModelLoadError
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import HIDDEN, SENTENCES, copy_tokenizer


def _t5_config() -> transformers.T5Config:
    return transformers.T5Config(
        vocab_size=30522,
        d_model=HIDDEN,
        d_kv=16,
        d_ff=37,
        num_layers=2,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=0,
        eos_token_id=102,
        decoder_start_token_id=0,
    )


@pytest.fixture(scope="module")
def sentence_t5(tmp_path_factory, minilm_path: Path) -> Path:
    """A tiny sentence-T5 / GTR layout saved by sentence-transformers: T5 encoder, mean pooling,
    a bias-free Dense, Normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    root = tmp_path_factory.mktemp("sentence-t5")
    torch.manual_seed(0)
    transformers.T5EncoderModel(_t5_config()).eval().save_pretrained(root / "raw")
    copy_tokenizer(minilm_path, root / "raw")
    transformer = Transformer(str(root / "raw"))
    torch.manual_seed(1)
    dense = Dense(HIDDEN, 16, bias=False, activation_function=torch.nn.Identity())
    modules = [transformer, Pooling(HIDDEN, "mean"), dense, Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(root / "st"))
    return root / "st"


def test_a_t5_encoder_embedder_matches_sentence_transformers(sentence_t5: Path) -> None:
    from sentence_transformers import SentenceTransformer

    assert json.loads((sentence_t5 / "config.json").read_text())["architectures"] == ["T5EncoderModel"]
    engine = Engine(sentence_t5)
    assert engine.supported_tasks[0] == "embed" and engine.embedding_dim == 16
    assert type(internals.loaded_module(engine)).__name__ == "T5EncoderModel"
    reference = SentenceTransformer(str(sentence_t5), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(engine.embed_array(SENTENCES), reference, atol=1e-5)


def test_a_full_t5_checkpoint_runs_its_encoder_only(tmp_path: Path, minilm_path: Path) -> None:
    torch.manual_seed(0)
    full = transformers.T5Model(_t5_config()).eval()
    full.save_pretrained(tmp_path)
    copy_tokenizer(minilm_path, tmp_path)
    engine = Engine(tmp_path, pooler_config={"pooling_type": "MEAN", "normalize": False})
    ids = engine.tokenize("an encoder only")
    with torch.no_grad():
        states = full.encoder(input_ids=torch.tensor([ids])).last_hidden_state[0]
    np.testing.assert_allclose(engine.embed_array(["an encoder only"])[0], states.mean(0).numpy(), atol=1e-5)


@pytest.mark.parametrize(
    ("config", "name"),
    [
        (transformers.BartConfig, "BartModel"),
        (transformers.MBartConfig, "MBartModel"),
        (transformers.PegasusConfig, "PegasusModel"),
    ],
)
def test_other_encoder_decoders_are_refused_at_load(tmp_path: Path, minilm_path: Path, config, name) -> None:
    cfg = config(
        vocab_size=30522,
        d_model=HIDDEN,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    getattr(transformers, name)(cfg).save_pretrained(tmp_path)
    copy_tokenizer(minilm_path, tmp_path)
    with pytest.raises(ModelLoadError, match="is an encoder-decoder model") as caught:
        Engine(tmp_path)
    assert "\n" not in str(caught.value) and name in str(caught.value)


def test_a_t5_with_a_task_head_is_refused(tmp_path: Path, minilm_path: Path) -> None:
    transformers.T5ForSequenceClassification(_t5_config()).save_pretrained(tmp_path)
    copy_tokenizer(minilm_path, tmp_path)
    with pytest.raises(ModelLoadError, match=r"T5ForSequenceClassification \(t5\) is an encoder-decoder"):
        Engine(tmp_path)


def test_architectures_contradicting_model_type_are_refused(tiny_model, tmp_path: Path) -> None:
    folder = tiny_model("bert")
    with pytest.raises(
        ModelLoadError, match=r"'RobertaModel' is a roberta class but model_type is 'bert'"
    ) as caught:
        Engine(folder, hf_overrides={"architectures": ["RobertaModel"]})
    assert "\n" not in str(caught.value)
    contradicting = tmp_path / "contradicting"
    contradicting.mkdir()
    for item in folder.iterdir():
        (contradicting / item.name).write_bytes(item.read_bytes())
    config = json.loads((folder / "config.json").read_text()) | {"architectures": ["XLMRobertaModel"]}
    (contradicting / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="contradicts itself"):
        Engine(contradicting)
    assert Engine(folder).spec.architecture == "BertModel"  # the consistent folder still loads
