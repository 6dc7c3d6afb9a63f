"""The BEIR reader: what it reads, and the file:line it names when a row is malformed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from poolrag.errors import InvalidInputError
from poolrag.evaluation import BeirDataset, BeirDocument, BeirFormatError, BeirQuery


def make_dataset(
    folder: Path, corpus: str | bytes | None = None, queries: str | None = None, qrels: str | None = None
) -> BeirDataset:
    folder.mkdir(parents=True, exist_ok=True)
    if corpus is None:
        corpus = json.dumps({"_id": "d1", "title": "T", "text": "x"}) + "\n"
    if queries is None:
        queries = json.dumps({"_id": "q1", "text": "y"}) + "\n"
    if qrels is None:
        qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"
    (folder / "corpus.jsonl").write_bytes(corpus if isinstance(corpus, bytes) else corpus.encode())
    (folder / "queries.jsonl").write_text(queries, encoding="utf-8")
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return BeirDataset(folder)


def test_reads_documents_queries_and_qrels(tmp_path: Path) -> None:
    corpus = (
        "\ufeff"  # a byte-order mark some exporters write
        + json.dumps({"_id": "d1", "title": "Pump", "text": "Rated 24 V.", "metadata": {"url": "u"}})
        + "\n\n"  # blank lines are skipped
        + json.dumps({"_id": 7, "text": "numeric id, no title"})
        + "\n"
    )
    queries = json.dumps({"_id": "q1", "text": "pump voltage", "metadata": {"kind": "rare-term"}}) + "\n"
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\t7\t0\n"
    dataset = make_dataset(tmp_path / "ds", corpus, queries, qrels)
    assert list(dataset.documents()) == [
        BeirDocument("d1", "Pump", "Rated 24 V.", {"url": "u"}),
        BeirDocument("7", "", "numeric id, no title"),
    ]
    assert list(dataset.queries()) == [BeirQuery("q1", "pump voltage", {"kind": "rare-term"})]
    assert dataset.qrels() == {"q1": {"d1": 2, "7": 0}}
    # Streaming: each call reads the file again.
    assert len(list(dataset.documents())) == 2


def test_qrels_without_header_and_other_splits(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "ds", qrels="q1\td1\t1\n")
    assert dataset.qrels() == {"q1": {"d1": 1}}
    # the header is the first line with content, after blank lines too
    dataset = make_dataset(tmp_path / "ds", qrels="\nquery-id\tcorpus-id\tscore\nq1\td1\t2\n")
    assert dataset.qrels() == {"q1": {"d1": 2}}
    (tmp_path / "ds" / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td1\t3\n")
    assert dataset.qrels("dev") == {"q9": {"d1": 3}}


def test_qrels_lines_ending_in_a_tab_are_read_as_beir_reads_them(tmp_path: Path) -> None:
    """BEIR's loader takes row[0], row[1], int(row[2]) of each tab-split line, so an exporter's
    trailing tab is harmless there; it was refused here as TREC qrels ("drop the second column")."""
    qrels = "query-id\tcorpus-id\tscore\t\nq1\td1\t1\t\nq1\td2\t0\t\t\r\n"
    assert make_dataset(tmp_path / "ds", qrels=qrels).qrels() == {"q1": {"d1": 1, "d2": 0}}


@pytest.mark.parametrize(
    ("file", "content", "line", "problem"),
    [
        ("corpus", '{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": "no end\n', 2, "not a JSON object"),
        ("corpus", '{"_id": "d1", "text": "ok"}\n["d2", "text"]\n', 2, "expected a JSON object"),
        ("corpus", '{"title": "no id", "text": "x"}\n', 1, '"_id" must be a string'),
        ("corpus", '{"_id": "", "text": "x"}\n', 1, '"_id" is empty'),
        ("corpus", '{"_id": "d1", "title": "no text"}\n', 1, '"text" must be a string'),
        ("corpus", '{"_id": "d1", "text": 3}\n', 1, '"text" must be a string'),
        ("corpus", '{"_id": "d1", "text": "x", "metadata": [1]}\n', 1, '"metadata" must be a JSON object'),
        ("corpus", b'{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": "\xff"}\n', 2, "not valid UTF-8"),
        ("queries", '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n', 2, "appears twice"),
        ("queries", '{"_id": true, "text": "a"}\n', 1, '"_id" must be a string'),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\n", 2, "expected 3 tab-separated fields"),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t0.5\n", 3, "is not an integer"),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n", 3, "judged 1 earlier and 2 here"),
        ("qrels", "query-id\tcorpus-id\tscore\n\td1\t1\n", 2, "empty query-id"),
        # a header-less file whose first score is a number but no integer lost that row unsaid
        ("qrels", "q1\td1\t1.0\nq2\td1\t1\n", 1, "score '1.0' is not an integer"),
        ("qrels", "q1\t0\td1\t1\n", 1, "this looks like TREC qrels"),
        # a trailing tab after no score: the missing score is said, not TREC qrels
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\t\t\n", 2, "score '' is not an integer"),
    ],
)
def test_malformed_rows_name_file_and_line(
    tmp_path: Path, file: str, content: str | bytes, line: int, problem: str
) -> None:
    dataset = make_dataset(tmp_path / "ds", **{file: content})
    path = {
        "corpus": dataset.corpus_path,
        "queries": dataset.queries_path,
        "qrels": dataset.qrels_path(),
    }[file]
    read = {
        "corpus": lambda: list(dataset.documents()),
        "queries": lambda: list(dataset.queries()),
        "qrels": dataset.qrels,
    }[file]
    with pytest.raises(BeirFormatError) as caught:
        read()
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert problem in str(caught.value)
    assert (caught.value.path, caught.value.line) == (path, line)
    assert isinstance(caught.value, InvalidInputError)  # front doors map it to a user error


def test_missing_folder_and_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(BeirFormatError, match="not a folder"):
        BeirDataset(tmp_path / "nope")
    dataset = make_dataset(tmp_path / "ds")
    (tmp_path / "ds" / "corpus.jsonl").unlink()
    with pytest.raises(BeirFormatError, match=r"corpus\.jsonl: file not found"):
        list(dataset.documents())
    with pytest.raises(BeirFormatError, match=r"qrels/dev\.tsv: file not found; this dataset's splits: test"):
        dataset.qrels("dev")  # a dataset with other splits names them (--split)
    (tmp_path / "ds" / "qrels" / "test.tsv").unlink()
    with pytest.raises(BeirFormatError, match=r"qrels/dev\.tsv: file not found; a BEIR dataset needs it"):
        dataset.qrels("dev")


def test_a_gzipped_file_in_place_of_the_plain_one_is_named_with_what_to_do(tmp_path: Path) -> None:
    """Copies of BEIR sets ship ``corpus.jsonl.gz``; BEIR's loader, like this one, reads the plain
    file, and "file not found" beside the .gz left the user guessing."""
    dataset = make_dataset(tmp_path / "ds")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        plain = tmp_path / "ds" / name
        plain.with_name(plain.name + ".gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    expected = r"corpus\.jsonl: file not found; corpus\.jsonl\.gz is there: decompress it \(gunzip -k\)"
    with pytest.raises(BeirFormatError, match=expected):
        list(dataset.documents())
    with pytest.raises(BeirFormatError, match=r"queries\.jsonl: file not found; queries\.jsonl\.gz is there"):
        list(dataset.queries())
    with pytest.raises(BeirFormatError, match=r"test\.tsv: file not found; test\.tsv\.gz is there"):
        dataset.qrels()


def test_the_judged_queries_are_those_a_ranking_can_score(tmp_path: Path, caplog) -> None:
    """A judged query missing from queries.jsonl counted as a zero in every average (dense MRR 0.6971
    became 0.6857 with one such line); now it is left out with a warning naming it, as is a query
    judged only with grade 0."""
    queries = "".join(json.dumps({"_id": q, "text": f"text {q}"}) + "\n" for q in ("q1", "q2", "q3"))
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t0\nqnope\td1\t1\n"
    dataset = make_dataset(tmp_path / "ds", queries=queries, qrels=qrels)
    with caplog.at_level("WARNING", logger="poolrag.evaluation.beir"):
        queries_kept, judged = dataset.judged_queries()
    assert [q.id for q in queries_kept] == ["q1"] and judged == {"q1": {"d1": 1}}
    missing, unanswerable = [r.getMessage() for r in caplog.records]
    assert missing.startswith("1 judged queries of") and missing.endswith("left out: qnope")
    assert "judged only with grade 0" in unanswerable and unanswerable.endswith(": q2")
    # eval --tune reads the judged queries three times (fold check, modes, tuning): said once each
    for _ in range(2):
        with caplog.at_level("WARNING", logger="poolrag.evaluation.beir"):
            assert dataset.judged_queries()[1] == judged
    assert [r.getMessage() for r in caplog.records] == [missing, unanswerable]


def test_a_corpus_document_without_text_is_left_out_with_a_warning(tmp_path: Path, caplog) -> None:
    from poolrag.evaluation.run import corpus_documents

    corpus = "".join(
        json.dumps(row) + "\n"
        for row in (
            {"_id": "d1", "text": "kept"},
            {"_id": "d2", "text": "   "},
            {"_id": "d3", "text": "\u200b"},
        )
    )
    dataset = make_dataset(tmp_path / "ds", corpus=corpus)
    with caplog.at_level("WARNING", logger="poolrag.evaluation.run"):
        assert [d.text for d in corpus_documents(dataset)] == ["kept"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and all("left out" in w and "is empty" in w for w in warnings)
    assert "document 'd2'" in warnings[0] and "document 'd3'" in warnings[1]


def test_relevant_documents_the_corpus_lacks_are_named(tmp_path: Path, caplog) -> None:
    """A conversion's most common slip (``D1`` for ``d1``) halved every metric without a word: such
    judgements still count, as in pytrec_eval, but the run says how many no ranking can return."""
    queries = "".join(json.dumps({"_id": q, "text": f"text {q}"}) + "\n" for q in ("q1", "q2"))
    qrels = "query-id\tcorpus-id\tscore\nq1\tD1\t1\nq2\td1\t1\nq2\tdoc9\t2\nq2\tgone\t0\n"
    dataset = make_dataset(tmp_path / "ds", queries=queries, qrels=qrels)
    _, judged = dataset.judged_queries()
    with caplog.at_level("WARNING", logger="poolrag.evaluation.beir"):
        dataset.warn_unknown_documents("test", judged, {"d1"})
    (message,) = [r.getMessage() for r in caplog.records]
    assert (
        message.startswith("2 relevant documents judged in")
        and "(1 queries have none left): D1, doc9" in message
    )
    caplog.clear()
    dataset.warn_unknown_documents("test", judged, {"d1", "D1", "doc9"})
    assert not caplog.records


@pytest.mark.parametrize("content", ["", "query-id\tcorpus-id\tscore\n", "\n\n"])
def test_a_qrels_file_without_judgements_says_so(tmp_path: Path, content: str) -> None:
    """An empty or header-only qrels file was read as no judgements, and ``poolrag eval`` then said no
    query of queries.jsonl is judged there, as though the ids mismatched."""
    dataset = make_dataset(tmp_path / "ds", qrels=content)
    with pytest.raises(
        BeirFormatError, match=r"qrels/test\.tsv: no judgements \(the file is empty or only a header\)"
    ):
        dataset.qrels()
