"""Document readers: text and Markdown files, JSONL, and any Python iterable of documents.

Every document gets a ``source`` that names it across runs (the resolved file path, plus the
line number for JSONL records, or the caller's own id), because chunk ids derive from it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolrag.errors import InvalidInputError

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
JSONL_SUFFIXES = (".jsonl",)


@dataclass(frozen=True)
class Document:
    """One text to ingest; ``metadata`` is copied into every chunk's payload."""

    source: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(TEXT_SUFFIXES + JSONL_SUFFIXES):
                yield Path(root) / name


def _read_jsonl(path: Path, text_field: str) -> Iterator[Document]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                raise InvalidInputError(
                    f"{path}:{number}: expected an object with a string {text_field!r} field"
                )
            text = record.pop(text_field)
            ident = record.pop("id", None)
            source = f"{path.resolve().as_posix()}#{ident if ident is not None else number}"
            yield Document(source, text, {k: v for k, v in record.items() if _is_scalar(v)})


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def read_paths(paths: Iterable[str | os.PathLike[str]], *, text_field: str = "text") -> Iterator[Document]:
    """Documents from files and folders (recursively: .txt, .md, .markdown, .rst, .jsonl).

    Raises:
        InvalidInputError: a path that does not exist, or a file that is not UTF-8 text.
    """
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InvalidInputError(f"no such file or folder: {raw}")
        for file in _files(path):
            if file.suffix.lower() in JSONL_SUFFIXES:
                yield from _read_jsonl(file, text_field)
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(f"{file} is not UTF-8 text: {exc}") from exc
            yield Document(file.resolve().as_posix(), text, {"filename": file.name})


def from_iterable(items: Iterable[Document | str | tuple[str, str] | dict[str, Any]]) -> Iterator[Document]:
    """Documents from Python objects: ``Document``, ``(source, text)``, ``{"source", "text", ...}``.

    Bare strings get ``source`` = ``"item-<n>"``; give real sources when re-running matters.
    """
    for number, item in enumerate(items):
        if isinstance(item, Document):
            yield item
        elif isinstance(item, str):
            yield Document(f"item-{number}", item)
        elif isinstance(item, tuple) and len(item) == 2:
            yield Document(str(item[0]), str(item[1]))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            data = dict(item)
            text = data.pop("text")
            source = str(data.pop("source", data.pop("id", f"item-{number}")))
            yield Document(source, text, {k: v for k, v in data.items() if _is_scalar(v)})
        else:
            raise InvalidInputError(
                f"document {number}: expected a Document, str, (source, text) or dict with 'text'"
            )
