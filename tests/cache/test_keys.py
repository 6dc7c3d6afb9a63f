"""Cache keys: a field added to ``PoolingParams`` later leaves the keys of caches written before it
where they were while it is unset, and moves them once it is set; the length rules that give the
same vectors share keys."""

from __future__ import annotations

from poolrag.cache.keys import cache_namespace
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.params import PoolingParams

FACTS = ModelFacts("m", "m@abc", ("embed",), 128, 8, False, None, ScoreKind.COSINE, "f00d", True, None)

# digests written by the code before ``prompt_name`` existed (commit b8c5835): caches on disk hold these
BEFORE = {
    PoolingParams(): "309fe259bad9e54f52be9c1d34da0fd4e98baa242caa4ee5ebd3427bc814b166",
    PoolingParams(input_type="query", prompt="q: "): (
        "855a9102526eec0cfbfb9e2e33011dd1bd0d3e21a0f4f4361bdd55974d074511"
    ),
    PoolingParams(normalize=False): "d6cf84f7ba8156871550bf12879c7b119373cfc11cf30d34321d704282ca2f98",
}


def test_unset_later_fields_keep_the_keys_caches_were_written_with() -> None:
    for params, digest in BEFORE.items():
        assert cache_namespace(FACTS, "embed", params).hex() == digest


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
