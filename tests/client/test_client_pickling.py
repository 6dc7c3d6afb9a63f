"""A client crosses processes as its settings; its connections and locks stay behind."""

from __future__ import annotations

import pickle

from poolrag.client import PoolragClient


def test_a_client_pickles_as_its_settings() -> None:
    client = PoolragClient("http://127.0.0.1:9/v1", "key", model="minilm", timeout=5.0, max_concurrency=2)
    again = pickle.loads(pickle.dumps(client))
    settings = ("base_url", "api_key", "model", "timeout", "max_inputs_per_request", "max_concurrency")
    assert [getattr(again, name) for name in settings] == [getattr(client, name) for name in settings]
