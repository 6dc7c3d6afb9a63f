"""The hybrid benchmark's dataset reads back with the BEIR reader and is built as its docstring says."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from poolrag.evaluation import BeirDataset

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "hybrid_dataset.py"
FUNCTION_WORDS = frozenset(
    re.findall(
        r"\w+",
        "a an the how do i my is what when which why can should to of in for on at and or it be from after "
        "your with does are this that so if not no then them they their its as by more than far too up",
    )
)


@pytest.fixture(scope="module")
def hybrid_dataset() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hybrid_dataset", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_written_dataset_reads_back_and_its_qrels_point_at_real_documents(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "hybrid")], capture_output=True, text=True, check=True
    )
    assert "300 documents, 60 queries (30 rare-term, 30 paraphrase)" in completed.stdout
    dataset = BeirDataset(tmp_path / "hybrid")
    documents = {d.id: d for d in dataset.documents()}
    queries = {q.id: q for q in dataset.queries()}
    qrels = dataset.qrels()
    assert len(documents) == 300 and len(queries) == 60
    assert set(qrels) == set(queries)
    for judged in qrels.values():
        assert len(judged) == 1
        ((doc_id, grade),) = judged.items()
        assert doc_id in documents and grade == 1
    assert Counter(q.metadata["kind"] for q in queries.values()) == {"rare-term": 30, "paraphrase": 30}


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path, hybrid_dataset: ModuleType) -> None:
    files = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
    hybrid_dataset.write(tmp_path / "a", seed=3)
    hybrid_dataset.write(tmp_path / "b", seed=3)
    hybrid_dataset.write(tmp_path / "c", seed=4)
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "corpus.jsonl").read_bytes() != (tmp_path / "c" / "corpus.jsonl").read_bytes()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower())) - FUNCTION_WORDS


def test_rare_terms_single_out_their_answer_and_paraphrases_share_no_word(hybrid_dataset: ModuleType) -> None:
    built = hybrid_dataset.build(seed=0)
    texts = {d["_id"]: f"{d['title']} {d['text']}" for d in built.documents}
    answer = {query_id: doc_id for query_id, doc_id, _ in built.qrels}
    for query in built.queries:
        text, kind = query["text"], query["metadata"]["kind"]
        if kind == "rare-term":
            term = re.fullmatch(r"Which (?:warehouse ships part (\S+)|team is (\S+) in)\?", text)
            assert term is not None, text
            rare = term.group(1) or term.group(2)
            holders = [doc_id for doc_id, doc in texts.items() if re.search(rf"\b{re.escape(rare)}\b", doc)]
            assert holders == [answer[query["_id"]]]
        else:
            assert not _words(text) & _words(texts[answer[query["_id"]]]), text
