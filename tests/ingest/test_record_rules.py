"""Issue 47, item 2: one validity rule for every field a reader takes. A record whose id, metadata
key or metadata value one of the stores cannot hold as given (a lone surrogate, NaN or Infinity, an
integer wider than 64 bits) is left out with one line naming its file, line and field, on Milvus
Lite, Qdrant local and qdrant-edge alike; the rest of the folder is stored, and the three stores
return the same payloads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.cache import CachedEmbedder
from poolrag.errors import InvalidInputError
from poolrag.ingest import DenseEncoder, Document, IngestPipeline, TokenChunker, from_iterable, read_paths
from poolrag.ingest.record_rules import metadata_problem
from poolrag.stores import open_store

#: what the stores do hold as given: the good records' metadata must come back exactly like this
KEPT = {
    "": "an empty key",
    "$meta": "Milvus's dynamic field's name",
    "vector": "a Milvus column's name",
    "nul": "a\x00b",
    "widest": 2**64 - 1,
    "lowest": -(2**63),
    "big": 1.7e308,
}

LINES = [
    json.dumps({"id": "first", "text": "Honeybee foragers tell their sisters where flowers are.", **KEPT}),
    json.dumps({"id": "bad\udc80id", "text": "A lone surrogate in the id."}),  # ASCII escapes: "\\udc80"
    json.dumps({"_id": "\ud800", "text": "A lone surrogate in BEIR's _id."}),
    json.dumps({"id": "value", "text": "A lone surrogate in a value.", "title": "x\udc80y"}),
    json.dumps({"id": "key", "text": "A lone surrogate in a key.", "ti\udc80tle": "x"}),
    '{"id": "nan", "text": "NaN, which json.loads takes.", "score": NaN}',
    '{"id": "inf", "text": "Infinity, which json.loads takes.", "score": -Infinity}',
    json.dumps({"id": "wide", "text": "An integer over 64 bits.", "count": 2**64}),
    json.dumps({"id": "low", "text": "An integer under 64 bits.", "count": -(2**63) - 1}),
    json.dumps({"id": "last", "text": "Spring tides come when the Sun and the Moon line up.", "n": 3}),
]
#: line -> the field its warning names
BAD = {2: "'id'", 3: "'_id'", 4: "'title'", 5: "'ti\\udc80tle'", 6: "'score'", 7: "'score'"}
BAD |= {8: "'count'", 9: "'count'"}
STORES = {"milvus": "--uri", "qdrant": "--path", "qdrant-edge": "--path"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("records") / "corpus"
    root.mkdir()
    (root / "records.jsonl").write_text("\n".join(LINES) + "\n")
    (root / "zz_after.md").write_text("# Sourdough\n\nA starter of wild yeast raises the dough.")
    return root


def _location(root: Path, kind: str) -> dict[str, str]:
    return {"uri": str(root / "m.db")} if kind == "milvus" else {"path": str(root / kind)}


def _payloads(kind: str, root: Path) -> dict[str, dict]:
    """Source -> the payload ``poolrag search`` gets back from the store, for every chunk."""
    store = open_store(kind, "c", **_location(root, kind))
    try:
        ids = list(store.list_sources())
        vector = next(iter(store.fetch_vectors(ids[:1]).values()))
        hits = store.search(vector, 100)
    finally:
        store.close()
    assert len(hits) == len(ids)
    return {hit.payload["source"].rsplit("/", 1)[-1]: hit.payload for hit in hits}


@pytest.fixture(scope="module")
def runs(corpus: Path, minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """One real ``poolrag ingest`` of the folder into each store: (process, source -> payload)."""
    out = {}
    for kind, flag in STORES.items():
        root = tmp_path_factory.mktemp(kind)
        location = next(iter(_location(root, kind).values()))
        env = {**os.environ, "POOLRAG_CACHE_DIR": str(root / "cache")}
        args = ["ingest", str(corpus), "--model", str(minilm_path), "--store", kind, flag, location]
        done = subprocess.run(
            [sys.executable, "-m", "poolrag.cli", *args, "--collection", "c", "--no-cache", "--json"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        out[kind] = (done, _payloads(kind, root) if done.returncode == 0 else {})
    return out


@pytest.mark.parametrize("kind", list(STORES))
def test_a_record_with_a_field_no_store_holds_is_left_out_with_one_line_and_the_rest_is_stored(
    runs, kind: str
) -> None:
    done, payloads = runs[kind]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert set(payloads) == {"records.jsonl#first", "records.jsonl#last", "zz_after.md"}
    warnings = re.findall(r"skipping (\S*records\.jsonl:.*)", done.stderr)  # one line each, as it happens
    assert len(warnings) == len(BAD), done.stderr
    for (line, field), warning in zip(BAD.items(), warnings, strict=True):
        assert f"records.jsonl:{line}: " in warning and field in warning, warning
    left_out = json.loads(done.stdout)["skipped"]
    assert [entry.split("records.jsonl:")[1].split(":")[0] for entry in left_out] == [str(n) for n in BAD]


def test_the_three_stores_return_the_same_payloads_and_the_good_records_as_given(runs) -> None:
    payloads = [runs[kind][1] for kind in STORES]
    assert payloads[0] and payloads[0] == payloads[1] == payloads[2]
    first = payloads[0]["records.jsonl#first"]
    assert {key: first[key] for key in KEPT} == KEPT
    assert payloads[0]["records.jsonl#last"]["n"] == 3


def test_read_paths_without_a_skipped_list_stops_at_the_bad_record_naming_it(corpus: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"records\.jsonl:2: 'id' is not valid Unicode"):
        list(read_paths([corpus]))


def test_a_file_whose_name_is_not_utf8_is_left_out_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("A readable file.")
    (Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname.txt"))).write_text("A readable text.")
    skipped: list = []
    docs = list(read_paths([tmp_path], skipped=skipped))
    assert [d.metadata["filename"] for d in docs] == ["good.txt"]
    assert len(skipped) == 1 and "the file's path is not valid Unicode" in skipped[0].reason


def test_documents_from_python_meet_the_same_rule_in_the_driver(tmp_path: Path, minilm_engine) -> None:
    """``from_iterable`` and hand-made :class:`Document` s reach the store through the driver, which
    leaves out the same documents (named by source and field) on qdrant-edge, which refuses NaN."""
    store = open_store("qdrant-edge", "c", path=str(tmp_path / "edge"))
    encoder = DenseEncoder(CachedEmbedder(minilm_engine))
    chunker = TokenChunker(minilm_engine.tokenizer, max_tokens=64)
    pipe = IngestPipeline(store, encoder, chunker, checkpoint_dir=tmp_path / "ck", progress=False)
    docs = [
        {"source": "a", "text": "Bees dance.", "lang": "en"},
        {"source": "nan", "text": "Not a number.", "score": float("nan")},
        Document("nested", "Nested values are checked too.", {"tags": ["x", {"deep": float("inf")}]}),
        Document("s\udc80", "A lone surrogate in the source."),
        Document("t", "A lone surrogate \ud800 in the text."),
        Document("none", None),  # type: ignore[arg-type]  # what a typo'd Python caller hands in
        Document(Path("p.txt"), "A path, not a source string."),  # type: ignore[arg-type]
        Document("m", "Metadata of None.", None),  # type: ignore[arg-type]
        {"source": "b", "text": "Tides turn.", "n": 2**64 - 1},
    ]
    try:
        report = pipe.run(from_iterable(docs))
        assert sorted(store.list_sources().values()) == ["a", "b"]
    finally:
        store.close()
    assert report.skipped == [
        "nan: 'score' is not a finite number (nan)",
        "nested: 'tags'[1]['deep'] is not a finite number (inf)",
        "s\\udc80: 'source' is not valid Unicode (lone surrogate at character 1)",
        "t: 'text' is not valid Unicode (lone surrogate at character 17)",
        "none: 'text' is of type NoneType, not a string",
        "p.txt: 'source' is of type PosixPath, not a string",
        "m: metadata is of type NoneType, not a mapping",
    ]


def test_the_rule_takes_json_values_and_names_the_first_bad_field() -> None:
    fine = {"n": True, "f": 0.5, "s": "", "none": None, "list": [1, "x"], "d": {"k": 1}}
    assert metadata_problem(fine) is None
    assert metadata_problem({"when": object()}) == "'when' is of type object, not a JSON value"
    assert metadata_problem({1: "x"}) == "a field name (1) is of type int, not a string"
    surrogate = "a field name ('k\\udc80') is not valid Unicode (lone surrogate at character 1)"
    assert metadata_problem({"k\udc80": 1}) == surrogate
