"""Reading a dataset in the BEIR layout, the format public retrieval benchmarks ship in.

    DATASET/corpus.jsonl      {"_id": ..., "title": ..., "text": ...} per line (or, for a model
                              that reads images, {"_id": ..., "image": "images/p1.png"}: a file in
                              the folder, an image or a PDF)
    DATASET/queries.jsonl     {"_id": ..., "text": ...} per line
    DATASET/qrels/test.tsv    query-id <TAB> corpus-id <TAB> score, after a header line

Corpora reach millions of documents, so documents and queries are streamed, never held. The
files are data: JSON is parsed with :func:`json.loads` and nothing in them is ever executed. A
malformed row stops the read with an error naming ``file:line``, because a silently skipped
judgement or document would quietly change every metric computed afterwards.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidInputError
from poolrag.text_validity import text_problem

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FOLDER = "qrels"


class BeirFormatError(InvalidInputError):
    """A BEIR file is missing or one of its rows is malformed; the message names the file and line."""

    def __init__(self, path: Path, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line


@dataclass(frozen=True)
class BeirDocument:
    id: str
    title: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: an image or PDF file, relative to the dataset folder, that is the document (``text`` optional)
    image: str | None = None


@dataclass(frozen=True)
class BeirQuery:
    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers; bad UTF-8 is reported at its line."""
    if not path.is_file():
        packed = path.with_name(path.name + ".gz")
        if packed.is_file():  # as copies of BEIR sets ship it; BEIR's loader reads the plain file too
            raise BeirFormatError(
                path, None, f"file not found; {packed.name} is there: decompress it (gunzip -k)"
            )
        raise BeirFormatError(path, None, "file not found; a BEIR dataset needs it")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise BeirFormatError(path, number, f"not valid UTF-8 ({error.reason})") from None
            if line.strip():
                yield number, line.rstrip("\r\n")


def _json_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in _lines(path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise BeirFormatError(path, number, f"not a JSON object ({error.msg})") from None
        if not isinstance(row, dict):
            raise BeirFormatError(path, number, f"expected a JSON object, got {type(row).__name__}")
        yield number, row


def _row_id(row: Mapping[str, Any], path: Path, number: int) -> str:
    value = row.get("_id")
    # Some published corpora write numeric ids as JSON numbers; they are still names, not values.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BeirFormatError(path, number, f'"_id" must be a string, got {value!r}')
    text = str(value)
    if not text:
        raise BeirFormatError(path, number, '"_id" is empty')
    return text


def _row_text(row: Mapping[str, Any], key: str, path: Path, number: int, required: bool) -> str:
    value = row.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BeirFormatError(path, number, f'"{key}" must be a string, got {value!r}')
    return value


def _image(row: Mapping[str, Any], path: Path, number: int) -> str | None:
    value = row.get("image")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BeirFormatError(path, number, f'"image" must name a file in the dataset folder, got {value!r}')
    return value


def _metadata(row: Mapping[str, Any], path: Path, number: int) -> Mapping[str, Any]:
    value = row.get("metadata", {})
    if not isinstance(value, dict):
        raise BeirFormatError(path, number, f'"metadata" must be a JSON object, got {value!r}')
    return value


class BeirDataset:
    """A BEIR-layout folder; each method re-reads its file, so iterating twice streams twice."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise BeirFormatError(self.folder, None, "not a folder; a BEIR dataset is a folder")
        self._warned: set[str] = set()

    def _warn_once(self, message: str, *args: object) -> None:
        """Log a warning about the files once per dataset: ``eval --tune`` reads the judged queries
        three times (fold check, modes, tuning), and the same warning thrice reads as three problems."""
        text = message % args
        if text not in self._warned:
            self._warned.add(text)
            logger.warning("%s", text)

    def __repr__(self) -> str:
        return f"BeirDataset({str(self.folder)!r})"

    @property
    def corpus_path(self) -> Path:
        return self.folder / CORPUS_FILE

    @property
    def queries_path(self) -> Path:
        return self.folder / QUERIES_FILE

    def qrels_path(self, split: str = "test") -> Path:
        return self.folder / QRELS_FOLDER / f"{split}.tsv"

    def documents(self) -> Iterator[BeirDocument]:
        """The corpus, one document at a time.

        Duplicate ids are not checked here: that would hold every id of a multi-million corpus in
        memory; the ingest refuses a repeated one (its source ``corpus.jsonl#id``) in one line.
        """
        path = self.corpus_path
        for number, row in _json_rows(path):
            image = _image(row, path, number)
            yield BeirDocument(
                id=_row_id(row, path, number),
                title=_row_text(row, "title", path, number, required=False),
                text=_row_text(row, "text", path, number, required=image is None),
                metadata=_metadata(row, path, number),
                image=image,
            )

    def image_path(self, name: str) -> Path:
        """The file a corpus row's ``image`` names, which must lie inside the dataset folder."""
        folder = self.folder.resolve()
        path = (folder / name).resolve()
        if not path.is_relative_to(folder):
            raise BeirFormatError(self.corpus_path, None, f"image {name!r} is outside the dataset folder")
        return path

    def queries(self) -> Iterator[BeirQuery]:
        """The queries, one at a time; a repeated id is an error (its judgements would be ambiguous)."""
        path = self.queries_path
        seen: set[str] = set()
        for number, row in _json_rows(path):
            query_id = _row_id(row, path, number)
            if query_id in seen:
                raise BeirFormatError(path, number, f"query id {query_id!r} appears twice")
            seen.add(query_id)
            text = _row_text(row, "text", path, number, required=True)
            if not text.strip():
                raise BeirFormatError(path, number, f"query {query_id!r} has an empty text")
            # zero-width or bidi marks alone, or a lone surrogate: the model would refuse it as
            # input[i] of a batch, which names neither the query nor its line
            if (problem := text_problem(text)) is not None:
                raise BeirFormatError(path, number, f"query {query_id!r} {problem}")
            yield BeirQuery(id=query_id, text=text, metadata=_metadata(row, path, number))

    def qrels(self, split: str = "test") -> dict[str, dict[str, int]]:
        """Judgements of ``qrels/<split>.tsv``: query id → document id → integer grade.

        The first line is a header when its score column is no number at all (BEIR writes
        ``query-id corpus-id score``); a header-less file is read from its first line, and a score
        that is a number but not an integer (``1.0``) is refused on every line, the first included.
        Empty fields after the third (a trailing tab) are ignored, as BEIR's loader ignores them; a
        fourth field with content is refused (TREC qrels put the document id third).
        """
        path = self.qrels_path(split)
        others = sorted(p.stem for p in path.parent.glob("*.tsv")) if not path.is_file() else []
        if others:
            splits = ", ".join(others)
            raise BeirFormatError(path, None, f"file not found; this dataset's splits: {splits} (--split)")
        judgements: dict[str, dict[str, int]] = {}
        for row, (number, line) in enumerate(_lines(path)):
            fields = line.split("\t") if "\t" in line else line.split()
            while len(fields) > 3 and not fields[-1].strip():
                fields.pop()  # a trailing tab: BEIR's own reader takes the first three fields
            if len(fields) != 3:
                problem = f"expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}"
                if len(fields) == 4:
                    problem += (
                        "; this looks like TREC qrels (query-id iteration corpus-id score): drop the "
                        "second column to make BEIR's qrels/SPLIT.tsv"
                    )
                raise BeirFormatError(path, number, problem)
            query_id, doc_id, score_text = (value.strip() for value in fields)
            try:
                grade = int(score_text)
            except ValueError:
                if row == 0 and not _is_number(score_text):
                    continue  # the header
                raise BeirFormatError(path, number, f"score {score_text!r} is not an integer") from None
            if not query_id or not doc_id:
                raise BeirFormatError(path, number, "empty query-id or corpus-id")
            previous = judgements.setdefault(query_id, {}).setdefault(doc_id, grade)
            if previous != grade:
                raise BeirFormatError(
                    path, number, f"({query_id}, {doc_id}) judged {previous} earlier and {grade} here"
                )
        if not judgements:  # said as such, not as queries that no judgement names
            raise BeirFormatError(path, None, "no judgements (the file is empty or only a header)")
        return judgements

    def judged_queries(self, split: str = "test") -> tuple[list[BeirQuery], dict[str, dict[str, int]]]:
        """The queries an evaluation averages over, and their judgements: those with a relevant
        document (a grade above 0). A judged query missing from the queries file is left out with a
        warning naming it (counted as a zero, it would lower every average), as are queries judged only
        with grade 0, which no ranking can score."""
        qrels = self.qrels(split)
        queries = [q for q in self.queries() if any(g > 0 for g in qrels.get(q.id, {}).values())]
        known = {q.id for q in self.queries()}
        missing = sorted(set(qrels) - known)
        if missing:
            self._warn_once(
                "%d judged queries of %s are not in %s; left out: %s",
                len(missing),
                self.qrels_path(split),
                self.queries_path,
                first_few(missing),
            )
        unanswerable = sorted(set(qrels) & known - {q.id for q in queries})
        if unanswerable:
            self._warn_once(
                "%d queries of %s are judged only with grade 0 (no relevant document); left out of "
                "the averages, where pytrec_eval would count each as 0: %s",
                len(unanswerable),
                self.qrels_path(split),
                first_few(unanswerable),
            )
        return queries, {q.id: qrels[q.id] for q in queries}

    def check_judged_documents_exist(self, split: str, qrels: Mapping[str, Mapping[str, int]]) -> None:
        """Refuse qrels none of whose relevant documents is in the corpus, before anything is embedded.

        Every metric would then be 0 in every mode, a table that looks like a result; it is a
        mismatch of ids (qrels of another dataset or split, ``D1`` against ``d1``, a prefix) that
        the user can fix. Only the judged ids are held while the corpus streams past."""
        relevant = {d for judged in qrels.values() for d, g in judged.items() if g > 0}
        if not relevant:
            return
        corpus_sample: list[str] = []
        for document in self.documents():
            if document.id in relevant:
                return
            if len(corpus_sample) < 3:
                corpus_sample.append(document.id)
        raise BeirFormatError(
            self.qrels_path(split),
            None,
            f"none of the {len(relevant)} documents judged relevant is in {self.corpus_path} "
            f"(judged: {first_few(sorted(relevant))}; the corpus has ids such as "
            f"{', '.join(corpus_sample)}); every metric would be 0: the corpus-id column must name "
            "corpus.jsonl's _id values exactly",
        )

    def warn_unknown_documents(
        self, split: str, qrels: Mapping[str, Mapping[str, int]], corpus_ids: Set[str]
    ) -> None:
        """Say which relevant documents the qrels name that the corpus lacks. They still count (as in
        pytrec_eval, and as BEIR's own sets keep a few), but no ranking can return them, and most
        often they are a conversion's mistake (``D1`` for ``d1``, a prefix, an int written as 1.0)."""
        unknown = sorted({d for judged in qrels.values() for d, g in judged.items() if g > 0} - corpus_ids)
        if not unknown:
            return
        hopeless = sorted(
            q for q, judged in qrels.items() if not any(g > 0 and d in corpus_ids for d, g in judged.items())
        )
        logger.warning(
            "%d relevant documents judged in %s are not in %s, and no ranking can return them "
            "(%d queries have none left): %s",
            len(unknown),
            self.qrels_path(split),
            self.corpus_path,
            len(hopeless),
            first_few(unknown),
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def first_few(ids: Sequence[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
