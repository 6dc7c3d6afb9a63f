"""Position-offset families (one list, config/positions.py): the length limit is exactly what the
model's position table allows, and a text of that length gives transformers' own hidden states.

MPNet is the case two lists once disagreed on: transformers numbers its positions from
``padding_idx + 1`` like RoBERTa, with ``padding_idx`` fixed at 1 whatever ``pad_token_id`` says,
so it always loses two positions; a RoBERTa loses ``pad_token_id + 1``; BERT loses none.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from sentence_transformers import SentenceTransformer

from poolrag import Engine
from poolrag.config.positions import OFFSET_MODEL_TYPES, position_offset, usable_positions
from poolrag.errors import InputTooLongError
from poolrag.testing.long_texts import long_paragraph
from poolrag.testing.tiny_models import SENTENCES, build_encoder, copy_tokenizer, write_sentence_transformers

TABLE = 24  # max_position_embeddings of the tiny models; their pad_token_id is 0


@pytest.mark.parametrize(("arch", "reserved"), [("bert", 0), ("roberta", 1), ("mpnet", 2)])
def test_the_longest_text_the_engine_allows_is_the_longest_transformers_can_run(
    tmp_path: Path, minilm_path: Path, arch: str, reserved: int
) -> None:
    folder = build_encoder(tmp_path / arch, arch, minilm_path, max_position_embeddings=TABLE)
    engine = Engine(folder, truncate=False)  # one token more must be refused, not cut
    assert engine.max_model_len == TABLE - reserved

    reference = transformers.AutoModel.from_pretrained(folder).eval()
    longest = [101, *range(2000, 2000 + engine.max_model_len - 2), 102]
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor([longest])).last_hidden_state[0].numpy()
        with pytest.raises((IndexError, RuntimeError)):  # one token more runs off the position table
            reference(input_ids=torch.tensor([[*longest, 102]]))
    got = engine.encode([{"prompt_token_ids": longest}], "token_embed")[0].outputs.data
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(got), expected / norms, rtol=1e-4, atol=1e-5)

    with pytest.raises(InputTooLongError):
        engine.encode([{"prompt_token_ids": [*longest, 102]}], "token_embed")


def test_the_offset_follows_the_padding_index() -> None:
    roberta = transformers.RobertaConfig(pad_token_id=1, max_position_embeddings=514)
    mpnet = transformers.MPNetConfig(pad_token_id=0, max_position_embeddings=514)  # 1 all the same
    bert = transformers.BertConfig(pad_token_id=0, max_position_embeddings=512)
    assert "mpnet" in OFFSET_MODEL_TYPES and "bert" not in OFFSET_MODEL_TYPES
    assert [position_offset(c) for c in (roberta, mpnet, bert)] == [2, 2, 0]
    assert [usable_positions(c) for c in (roberta, mpnet, bert)] == [512, 512, 512]
    assert usable_positions(transformers.PretrainedConfig()) is None


def test_a_model_with_no_position_limit_reads_texts_of_any_length(tmp_path: Path, minilm_path: Path) -> None:
    """XLNet's config says ``max_position_embeddings = -1`` (relative positions, no table): it was
    taken as the limit, and every text was refused ("this model reads -1 tokens")."""
    torch.manual_seed(0)
    config = transformers.XLNetConfig(
        vocab_size=30522, d_model=32, n_layer=2, n_head=2, d_inner=37, pad_token_id=0
    )
    folder = tmp_path / "xlnet"
    transformers.XLNetModel(config).eval().save_pretrained(folder)
    copy_tokenizer(minilm_path, folder)
    write_sentence_transformers(folder, pooling="mean", normalize=True)
    st = SentenceTransformer(str(folder), device="cpu")
    engine = Engine(folder)
    assert engine.max_model_len == st.max_seq_length == 128
    texts = [long_paragraph(st.tokenizer, 0, tokens=150), *SENTENCES]
    np.testing.assert_allclose(engine.embed_array(texts), st.encode(texts), atol=1e-5, rtol=0)


# RoBERTa's embeddings, reused: each family numbers positions from pad_token_id + 1 as well
ROBERTA_STYLE = {
    "roberta-prelayernorm": (transformers.RobertaPreLayerNormConfig, {}),
    "xmod": (transformers.XmodConfig, {"languages": ["en_XX"], "default_language": "en_XX"}),
    "ibert": (transformers.IBertConfig, {}),
    "longformer": (transformers.LongformerConfig, {"attention_window": 4}),
    "luke": (transformers.LukeConfig, {"entity_vocab_size": 10, "entity_emb_size": 16}),
}


@pytest.mark.parametrize("family", sorted(ROBERTA_STYLE))
@pytest.mark.parametrize("pad", [0, 1])
def test_the_limit_of_each_roberta_style_family_is_what_transformers_runs(family: str, pad: int) -> None:
    """Off the list, these families' limit was the whole table: where neither the tokenizer nor the
    folder named a smaller one, a text that long passed the length check, then ran off the table."""
    config_class, extra = ROBERTA_STYLE[family]
    config = config_class(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=TABLE, pad_token_id=pad, **extra,
    )  # fmt: skip
    model = transformers.AutoModel.from_config(config).eval()
    limit = usable_positions(config)
    assert limit is not None
    with torch.no_grad():
        model(input_ids=torch.full((1, limit), 5))
        with pytest.raises((IndexError, RuntimeError)):  # one token more runs off the position table
            model(input_ids=torch.full((1, limit + 1), 5))
