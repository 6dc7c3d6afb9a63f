"""``poolrag ingest --ray --hybrid --checkpoint``: ``kill -9`` mid-run, run it again,
and the store holds exactly what one uninterrupted single-process run writes (nothing lost, nothing
twice), while Ray's own lines stay below WARNING.

Milvus Lite only: into a Milvus Lite file or a Qdrant local folder the driver writes, through the
same store calls as a single-process run (``actors_write``), and tests/ingest kills and resumes
that run on both stores. Qdrant local mode on Ray is tests/scaleout/test_ray_ingest*.py's."""

from __future__ import annotations

import json
from pathlib import Path

import kill_resume
import numpy as np
import pytest

from poolrag.cli import main
from poolrag.stores import open_store

pytestmark = pytest.mark.slow


def read_back(location: list[str]) -> tuple[dict, dict, int]:
    """Ids → (source, dense vector), ids → sparse vector, and the number of stored rows."""
    store = open_store("milvus", "docs", **kill_resume.store_kwargs("milvus", location))
    try:
        sources = store.list_sources()
        dense = store.fetch_vectors(list(sources))
        rows = {cid: (source, dense[cid]) for cid, source in sources.items()}
        return rows, kill_resume.stored_sparse(store, "milvus", list(sources)), store.count()
    finally:
        store.close()


def ray_chatter(stderr: str) -> list[str]:
    """Ray's INFO lines (its start, Ray Data's plan and progress reports), gRPC's fork notes and Ray's
    deprecation warnings: about twenty lines a run before the commands kept Ray at WARNING."""
    said = ("\tINFO ", "Deprecat", "fork_posix", "%|")
    return [line for line in stderr.splitlines() if any(part in line for part in said)]


def test_sigkilled_ray_ingest_resumes_to_the_single_process_result(
    no_cluster_in_process, minilm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    corpus = kill_resume.write_subject_corpus(tmp_path / "corpus")
    common = [str(corpus), "--store", "milvus", "--collection", "docs", "--model", str(minilm_path)]
    common += ["--hybrid", "--analyzer", "words", "--chunk-tokens", "32", "--overlap", "4"]
    common += ["--batch-size", "2", "--no-cache", "--quiet", "--json"]
    clean_at = kill_resume.store_location("milvus", tmp_path / "clean")
    (tmp_path / "clean").mkdir()
    # the reference: one uninterrupted single-process run, in this process
    assert main(["ingest", *common, *clean_at, "--checkpoint", str(tmp_path / "clean.json")]) == 0
    clean = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    checkpoint = tmp_path / "ray.checkpoint.json"
    ray_at = kill_resume.store_location("milvus", tmp_path / "ray")
    (tmp_path / "ray").mkdir()
    # one actor: under CI load two had not finished two documents within the harness's 240 s
    args = [*common, *ray_at, "--checkpoint", str(checkpoint), "--ray", "--ray-workers", "1"]
    done_before = kill_resume.kill_mid_run(args, checkpoint)
    report, stderr = kill_resume.resume_logged(args)

    assert ray_chatter(stderr) == [], stderr[-3000:]
    assert report["resumed"] is True and report["documents"] == len(kill_resume.SUBJECTS)
    assert report["documents_skipped"] >= done_before
    assert 0 < report["upserted"] < clean["upserted"]  # the killed run's chunks were not written again
    assert not checkpoint.exists()  # a finished run leaves none
    want_rows, want_sparse, want_count = read_back(clean_at)
    got_rows, got_sparse, got_count = read_back(ray_at)
    assert got_count == want_count == clean["upserted"]  # nothing stored twice, nothing missing
    assert got_rows.keys() == want_rows.keys()
    for cid, (source, vector) in want_rows.items():
        assert got_rows[cid][0] == source
        np.testing.assert_allclose(got_rows[cid][1], vector, atol=1e-6, rtol=0)
    assert got_sparse == want_sparse
