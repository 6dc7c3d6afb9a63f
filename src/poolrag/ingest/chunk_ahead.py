"""Documents chunked on one background thread, in order, a bounded number of chunks ahead.

Why: once the forward pass is fast (a GPU, a small model), reading and tokenising the next
documents and writing the last batch to the store take as long as embedding it. The pipeline's
thread writes to the store (every store call stays on one thread) and hands batches to the
embedding thread; this thread reads and chunks what comes next meanwhile, so a store write that
waits on the disk (Qdrant local commits each point) or a forward that waits on the GPU no longer
holds the chunking up.

Admission stays with the caller (the driver decides on its own thread which documents to chunk);
each admitted document's chunks come back in order, exceptions included, at the point where the
caller reads them. Memory: at most ``max_chunks`` chunks wait per document, and the thread works on
one document at a time, so a single huge file never sits in memory.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

Doc = TypeVar("Doc")
Item = TypeVar("Item")

_POLL_S = 0.1  # how often a producer blocked on a full queue checks whether the run was abandoned


class _End:
    """A document's last entry: its chunker finished, or raised ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class ChunkAhead(Generic[Doc, Item]):
    """Run ``chunks_of(doc)`` for submitted documents on one thread, in submission order.

    Args:
        chunks_of: a document's chunks (an iterator read lazily on the thread).
        max_chunks: chunks of one document that may wait to be read.
    """

    def __init__(self, chunks_of: Callable[[Doc], Iterable[Item]], max_chunks: int) -> None:
        self._chunks_of = chunks_of
        self._max_chunks = max_chunks
        self._waiting: deque[tuple[Doc, queue.Queue[object]]] = deque()
        self._stopped = threading.Event()
        self._executor: ThreadPoolExecutor | None = None

    def __len__(self) -> int:
        """Documents submitted and not yet taken."""
        return len(self._waiting)

    def submit(self, doc: Doc) -> None:
        """Start chunking ``doc`` once the documents before it are chunked."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="poolrag-ingest-chunk")
        out: queue.Queue[object] = queue.Queue(self._max_chunks + 1)  # + 1: the end marker
        self._executor.submit(self._produce, doc, out)
        self._waiting.append((doc, out))

    def take(self) -> tuple[Doc, Iterator[Item]]:
        """The oldest submitted document and its chunks as they are made (read them all before the
        next :meth:`take`); a chunker's exception is raised where its chunks stop."""
        doc, out = self._waiting.popleft()
        return doc, self._read(out)

    def close(self) -> None:
        """Stop the thread (also in the middle of a document: after a failure nothing more is read)."""
        self._stopped.set()
        self._waiting.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _produce(self, doc: Doc, out: queue.Queue[object]) -> None:
        try:
            for chunk in self._chunks_of(doc):
                if not self._put(out, chunk):
                    return
        except BaseException as error:  # re-raised on the caller's thread, in order
            self._put(out, _End(error))
        else:
            self._put(out, _End())

    def _put(self, out: queue.Queue[object], entry: object) -> bool:
        while not self._stopped.is_set():
            try:
                out.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    @staticmethod
    def _read(out: queue.Queue[object]) -> Iterator[Item]:
        while True:
            entry = out.get()
            if isinstance(entry, _End):
                if entry.error is not None:
                    raise entry.error
                return
            yield entry  # type: ignore[misc]
