"""Issue 13, items 2 and 4 (stores): collection names checked once for every store, unwritable
locations reported at once, and Milvus taking the payloads Qdrant takes, returning them unchanged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from stores_support import FAST_RETRY, STORE_KINDS, store_location

from poolrag.errors import InvalidInputError
from poolrag.stores import open_store
from poolrag.stores.local_paths import StorePathError


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("name", ["../../escape", "a/b", "", "a" * 300, "9lives", "with-dash", "sp ace"])
def test_invalid_collection_names_are_refused_before_anything_is_created(
    kind: str, name: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInputError, match="collection name"):
        open_store(kind, name, retry=FAST_RETRY, **store_location(kind, tmp_path))
    assert not any(tmp_path.parent.glob("escape*")) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_names_every_store_accepts_work(kind: str, make_store) -> None:
    for name in ("_private", "Docs_2024", "a" * 255):
        assert make_store(kind, name).collection == name


READ_ONLY = {"milvus": {"uri": "/sys/poolrag_milvus.db"}, "qdrant": {"path": "/sys/poolrag_qdrant"}}


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux sysfs (read-only even for root)")
@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_a_read_only_location_is_reported_at_once_as_a_permission_problem(kind: str) -> None:
    started = time.monotonic()
    with pytest.raises(StorePathError, match=r"cannot write .* at /sys.*(permission problem|read-only file)"):
        open_store(kind, "docs", **READ_ONLY[kind])  # default retry: 5 attempts, none used
    assert time.monotonic() - started < 2


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux procfs")
def test_a_location_that_refuses_files_for_another_reason_is_not_called_a_permission_problem() -> None:
    with pytest.raises(StorePathError) as refused:  # procfs: "No such file or directory"
        open_store("milvus", "docs", uri="/proc/poolrag_milvus.db")
    assert "permission" not in str(refused.value) and "choose a writable location" in str(refused.value)


def _payload_corpus(root: Path) -> Path:
    root.mkdir()
    records = [
        {"id": "clash", "text": "Honeybees dance to show the way to flowers.", "vector": "blue", "tok": 3},
        {"id": "L" * 5000, "text": "The Moon pulls the oceans into two tidal bulges.", "lang": "en"},
        {"id": "blob", "text": "q" * 70_000},
    ]
    path = root / "tricky.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def test_milvus_and_qdrant_take_the_same_tricky_corpus_and_return_the_same_payloads(
    tmp_path: Path, minilm_engine, make_store
) -> None:
    from poolrag.cache import CachedEmbedder, EmbeddingCache
    from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker, read_paths

    corpus = _payload_corpus(tmp_path / "corpus")
    embedder = CachedEmbedder(minilm_engine, EmbeddingCache(tmp_path / "cache.sqlite"))
    payloads = {}
    for kind in ("milvus", "qdrant"):
        store = make_store(kind)
        pipeline = IngestPipeline(
            store,
            DenseEncoder(embedder),
            TokenChunker.for_model(minilm_engine.tokenizer, minilm_engine.facts, overlap=16),
            checkpoint_dir=tmp_path / "ck",
            progress=False,
        )
        report = pipeline.run(read_paths([corpus]))
        assert report.upserted == store.count() > 3
        sources = set(store.list_sources().values())
        assert any(len(s) > 5000 for s in sources) and len(sources) == 3
        hits = store.search(np.asarray(embedder.embed_query("bees")), limit=report.upserted)
        payloads[kind] = {h.id: h.payload for h in hits}
        assert pipeline.run(read_paths([corpus])).upserted == 0  # long sources are recognised again
    assert payloads["milvus"] == payloads["qdrant"]
    clash = next(p for p in payloads["milvus"].values() if p["source"].endswith("#clash"))
    assert (clash["vector"], clash["tok"]) == ("blue", 3)
    assert max(len(p["text"]) for p in payloads["milvus"].values()) < 10_000
