"""What a request weighs in the in-flight token budget: its token ids, and each text's estimated
tokens (characters / 4) up to what one text can put in flight, the model's length. A 9 MiB text
the default cut reads as 256 tokens weighed 2.4 M, and one client posting such legal requests had
the model answer 503 to 41 % of everyone else's queries."""

from __future__ import annotations

import json
from pathlib import Path

from poolrag import Engine
from poolrag.server.parsing import CHARS_PER_TOKEN, parse_body
from poolrag.server.schemas import EmbeddingRequest
from poolrag.server.settings import Limits, ServerSettings


def test_each_texts_estimate_stops_at_what_one_text_can_put_in_flight() -> None:
    limits = Limits.resolve(ServerSettings(served_model_names=("m",)), 512)
    big, small = "word " * 400_000, "a short query"
    raw = json.dumps({"input": [big, small], "model": "m"}).encode()
    parsed = parse_body(raw, EmbeddingRequest, limits)
    all_chars = len(big) + len(small) + len("m")
    assert parsed.tokens == parsed.tokens_within(None) == -(-all_chars // CHARS_PER_TOKEN)
    # the big text weighs the cap; the small one and the model name their own estimates
    assert parsed.tokens_within(512) == 512 + -(-len(small) // CHARS_PER_TOKEN) + 1
    ids = parse_body(json.dumps({"input": [[1, 2, 3] * 300]}).encode(), EmbeddingRequest, limits)
    assert ids.tokens_within(512) == 900  # token ids are counted as they are


def test_an_engines_cap_is_its_length_unless_it_embeds_long_inputs_whole(
    minilm_engine: Engine, minilm_path: Path
) -> None:
    assert minilm_engine.text_token_cap == minilm_engine.max_model_len
    chunked = Engine(minilm_path, pooler_config='{"enable_chunked_processing": true}')
    try:
        assert chunked.text_token_cap is None  # its long inputs run whole, in chunks
    finally:
        chunked.close()
