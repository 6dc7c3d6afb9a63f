"""GET /metrics: Prometheus counters for requests, tokens, queue, batch sizes and latency."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .conftest import Served, cli_server


def _samples(http: httpx.Client, url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = http.get(f"{url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_requests_tokens_and_batches_are_counted(minilm_server: Served, http: httpx.Client) -> None:
    path = (("path", "/v1/embeddings"),)
    model = (("model", minilm_server.model),)  # what runs on the model's engine is labelled by model
    on_model = (*model, *path)
    ok = ("poolrag_requests_total", (("path", "/v1/embeddings"), ("status", "200")))
    bad = ("poolrag_requests_total", (("path", "/v1/embeddings"), ("status", "400")))
    before = _samples(http, minilm_server.url)
    usage = 0
    for texts in (["one"], ["two", "three"], ["four", "five", "six"]):
        usage += http.post(f"{minilm_server.url}/v1/embeddings", json={"input": texts}).json()["usage"][
            "prompt_tokens"
        ]
    http.post(f"{minilm_server.url}/v1/embeddings", json={"input": []})
    after = _samples(http, minilm_server.url)

    assert after[ok] - before.get(ok, 0) == 3
    assert after[bad] - before.get(bad, 0) == 1
    tokens = ("poolrag_prompt_tokens_total", on_model)
    assert after[tokens] - before.get(tokens, 0) == usage
    batch_sum = ("poolrag_request_batch_size_sum", on_model)
    assert after[batch_sum] - before.get(batch_sum, 0) == 6
    latency = ("poolrag_request_duration_seconds_count", path)
    assert after[latency] - before.get(latency, 0) == 4
    engine_time = ("poolrag_engine_duration_seconds_count", on_model)
    assert after[engine_time] - before.get(engine_time, 0) == 3
    batches = ("poolrag_engine_batches_total", model)
    sequences = ("poolrag_engine_sequences_total", model)
    assert after[batches] - before[batches] >= 1  # the core may batch several requests together
    assert after[sequences] - before[sequences] == 6  # six distinct texts
    real, padded = ("poolrag_engine_tokens_total", model), ("poolrag_engine_padded_tokens_total", model)
    assert after[real] <= after[padded]
    assert after[("poolrag_queue_depth", model)] == 0
    assert after[("poolrag_queue_capacity", model)] == 256


def test_unknown_paths_share_one_label(minilm_server: Served, http: httpx.Client) -> None:
    for i in range(3):
        http.get(f"{minilm_server.url}/scan/{i}")
    labels = {dict(labels).get("path") for _, labels in _samples(http, minilm_server.url)}
    assert "unmatched" in labels
    assert not any(str(label).startswith("/scan") for label in labels)


def test_a_route_with_a_parameter_is_counted_under_its_template(
    minilm_server: Served, http: httpx.Client
) -> None:
    """Each model name a caller makes up would otherwise be a series of its own (a scraper's and the
    server's memory grew without bound)."""
    for i in range(3):
        http.get(f"{minilm_server.url}/v1/models/made-up-{i}")
    samples = _samples(http, minilm_server.url)
    labels = {dict(labels).get("path") for _, labels in samples}
    assert not any(str(label).startswith("/v1/models/made-up") for label in labels)
    template = [
        v
        for (name, labels), v in samples.items()
        if name == "poolrag_requests_total" and ("path", "/v1/models/{model:path}") in labels
    ]
    assert sum(template) >= 3


def test_probes_and_docs_have_labels_of_their_own_and_the_process_is_measured(
    minilm_server: Served, http: httpx.Client
) -> None:
    """/ping, /docs and TEI's /embeddings were counted as "unmatched" beside 404 scans (only the
    routes in the API description were known), and the scrape had no process or GC series."""
    for path in ("/ping", "/docs"):
        assert http.get(f"{minilm_server.url}{path}").status_code == 200
    assert http.post(f"{minilm_server.url}/embeddings", json={"input": "hi"}).status_code == 200
    samples = _samples(http, minilm_server.url)
    labels = {dict(labels).get("path") for _, labels in samples}
    assert {"/ping", "/docs", "/embeddings"} <= labels
    names = {name for name, _ in samples}
    assert "process_resident_memory_bytes" in names and "python_gc_collections_total" in names


def _documented_metrics() -> set[str]:
    """The names in the first column of docs/server.md's metrics table."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text(encoding="utf-8")
    section = page.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `poolrag_")]
    return {name for cell in rows for name in re.findall(r"`(poolrag_[a-z_]+)`", cell)}


def test_every_metric_the_server_exports_is_in_the_docs_table(
    minilm_server: Served, http: httpx.Client
) -> None:
    """An operator writes alerts from the table: a series missing there is one nobody finds."""
    http.post(f"{minilm_server.url}/v1/embeddings", json={"input": ["one"]})  # every series has a sample
    text = http.get(f"{minilm_server.url}/metrics").text
    exported = {
        f"{family.name}_total" if family.type == "counter" else family.name
        for family in text_string_to_metric_families(text)
        if family.name.startswith("poolrag_") and not family.name.endswith("_created")  # start times
    }
    assert exported - _documented_metrics() == set()


def test_with_the_multiprocess_mode_each_models_engine_series_is_there_at_zero_before_any_request(
    minilm_path: Path, tmp_path: Path
) -> None:
    """prometheus_client's multiprocess mode (``--workers``, or ``PROMETHEUS_MULTIPROC_DIR``) left a
    model's engine counters out until something added to them: before the first request none was
    scraped, and ``poolrag_engine_truncated_inputs_total`` not until an input was cut, so a rate of
    it read as no data rather than zero."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    args = (str(minilm_path), "--served-model-name", "minilm")
    with cli_server(tmp_path / "server.log", *args, env=env) as (url, _), httpx.Client(timeout=30) as http:
        samples = _samples(http, url)
        for field in ("batches", "sequences", "tokens", "padded_tokens", "truncated_inputs"):
            assert samples[f"poolrag_engine_{field}_total", (("model", "minilm"),)] == 0
        http.post(f"{url}/v1/embeddings", json={"input": ["a short text"]}).raise_for_status()
        samples = _samples(http, url)
        assert samples["poolrag_engine_sequences_total", (("model", "minilm"),)] == 1
        assert samples["poolrag_engine_truncated_inputs_total", (("model", "minilm"),)] == 0
