"""Cache keys: the same weights share keys whatever the model is called; a field added to
``PoolingParams`` later leaves the keys of caches written before it where they were while it is
unset, and moves them once it is set; the length rules that give the same vectors share keys."""

from __future__ import annotations

from dataclasses import replace

from poolrag.cache.keys import cache_namespace, image_key, text_key
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.params import PoolingParams

FACTS = ModelFacts("m", "m@abc", ("embed",), 128, 8, False, None, ScoreKind.COSINE, "f00d", True, None)

# digests of key version 3 (the weights fingerprint, not name@weights): caches on disk hold these, and
# a field added to PoolingParams later must leave them where they are while it is unset
BEFORE = {
    PoolingParams(): "f69cd3e7142572206967111b517dad77c01e2cf48be58fa8b90f9f18b4210c27",
    PoolingParams(input_type="query", prompt="q: "): (
        "84f0c4328d3ce1029ddce9a055b029382693ffb259213d714bed5e0cc9d03195"
    ),
    PoolingParams(normalize=False): "e60fedf35df742f91352b1deecb0ce804c82f2a2d18edc8dfc57fbc91576cff7",
}


def test_unset_later_fields_keep_the_keys_caches_were_written_with() -> None:
    for params, digest in BEFORE.items():
        assert cache_namespace(FACTS, "embed", params).hex() == digest


def test_the_models_name_is_not_part_of_the_key_its_weights_are() -> None:
    plain = cache_namespace(FACTS, "embed", PoolingParams())
    assert cache_namespace(FACTS.renamed("./elsewhere/m"), "embed", PoolingParams()) == plain
    assert cache_namespace(replace(FACTS, model_identity="m@abd"), "embed", PoolingParams()) != plain


def test_a_named_prompt_has_keys_of_its_own() -> None:
    plain = cache_namespace(FACTS, "embed", PoolingParams())
    named = {cache_namespace(FACTS, "embed", PoolingParams(prompt_name=n)) for n in ("query", "clustering")}
    assert len(named) == 2 and plain not in named


def test_cutting_at_the_models_length_shares_the_defaults_keys_and_refusing_has_its_own() -> None:
    """ingest's default and the framework adapters' ``truncate_prompt_tokens=-1`` give the same
    vectors, so one reads what the other computed; an explicit refusal is never answered by a cut
    vector, so it keys apart. A shorter limit gives other vectors."""
    default = cache_namespace(FACTS, "embed", PoolingParams())
    for same in (
        PoolingParams(truncate_prompt_tokens=-1),
        PoolingParams(truncate_prompt_tokens=FACTS.max_model_len),
        PoolingParams(truncate=True),
    ):
        assert cache_namespace(FACTS, "embed", same) == default, same
    refusing = cache_namespace(FACTS, "embed", PoolingParams(truncate=False))
    shorter = cache_namespace(FACTS, "embed", PoolingParams(truncate_prompt_tokens=16))
    assert len({default, refusing, shorter}) == 3


def test_a_texts_key_is_where_caches_wrote_it_and_no_text_reaches_an_images() -> None:
    namespace = cache_namespace(FACTS, "embed", PoolingParams())
    # the key a text has had since key version 3: an image key space of its own must not move it
    assert text_key(namespace, "a portrait").hex() == (
        "39874056352281f9e91aa9bdde9ebe17a97d9cf87ef2602fba941d55dd1eed18"
    )
    identity = "image-bytes:" + "ab" * 32
    spelled = {text_key(namespace, f"{prefix}{identity}") for prefix in ("", "\x00", "\x01", "\x00\x01")}
    assert image_key(namespace, identity) not in spelled


def test_each_sentence_pooling_and_a_left_out_prompt_have_keys_of_their_own(tmp_path, minilm_path) -> None:
    """The same weights pooled by weighted mean, sum / sqrt(length), mean, or mean without the
    prompt (a Pooling module's ``include_prompt: false``) give other vectors: never one cache key."""
    from poolrag import Engine
    from poolrag.testing.tiny_models import build_encoder, write_sentence_transformers

    folder = write_sentence_transformers(build_encoder(tmp_path / "m", "bert", minilm_path, seed=5))
    params = PoolingParams(prompt="query: ")
    keys = {
        cache_namespace(Engine(folder, pooler_config={"pooling_type": kind}).facts, "embed", params)
        for kind in ("MEAN", "WEIGHTEDMEAN", "MEAN_SQRT_LEN")
    }
    (folder / "1_Pooling" / "config.json").write_text('{"embedding_dimension": 32, "include_prompt": false}')
    keys.add(cache_namespace(Engine(folder).facts, "embed", params))
    assert len(keys) == 4
